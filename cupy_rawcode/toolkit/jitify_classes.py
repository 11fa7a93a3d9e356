"""The classes some declaration stubs define under jitify=True (CuPy's CUPY_USE_JITIFY defined):
members declared and none defined, as Jitify's own headers had them. A header shared with host
code may then hold a std::string member or stream to std::ostream in an inline function (QUDA's
tune_key.h and kernel_helper.h) and still parse; a member called in device code is unresolved at
link time, and compiler/hints.py names the header. shims.py renders them into the stubs."""

from __future__ import annotations

from .shimdata import STDEXCEPT_CLASSES

_ARITHMETIC = (
    *("bool", "short", "unsigned short", "int", "unsigned int", "long", "unsigned long"),
    *("long long", "unsigned long long", "float", "double", "long double"),
)
# stub header -> (headers its definitions need, the definitions in namespace std)
JITIFY_DECLS: dict[str, tuple[tuple[str, ...], str]] = {
    "string": (
        (),
        "template <class C, class T, class A> class basic_string {\n"
        "public:\n"
        "  typedef C value_type; typedef size_t size_type; typedef C* iterator;\n"
        "  typedef const C* const_iterator; static const size_type npos = size_type(-1);\n"
        "  basic_string(); basic_string(const C* s); basic_string(const C* s, size_type n);\n"
        "  basic_string(size_type n, C c); basic_string(const basic_string& o); ~basic_string();\n"
        "  basic_string& operator=(const basic_string& o); basic_string& operator=(const C* s);\n"
        "  const C* c_str() const; const C* data() const; size_type size() const;\n"
        "  size_type length() const; bool empty() const; void clear();\n"
        "  C& operator[](size_type i); const C& operator[](size_type i) const;\n"
        "  basic_string& operator+=(const basic_string& o); basic_string& operator+=(const C* s);\n"
        "  basic_string& operator+=(C c); basic_string& append(const basic_string& o);\n"
        "  basic_string& append(const C* s); int compare(const basic_string& o) const;\n"
        "  basic_string substr(size_type pos = 0, size_type n = npos) const;\n"
        "  size_type find(const basic_string& o, size_type pos = 0) const;\n"
        "  iterator begin(); iterator end(); const_iterator begin() const;\n"
        "  const_iterator end() const;\n"
        "};\n"
        "template <class C, class T, class A> basic_string<C, T, A> operator+(\n"
        "  const basic_string<C, T, A>& a, const basic_string<C, T, A>& b);\n"
        "template <class C, class T, class A> basic_string<C, T, A> operator+(\n"
        "  const basic_string<C, T, A>& a, const C* b);\n"
        "template <class C, class T, class A> basic_string<C, T, A> operator+(\n"
        "  const C* a, const basic_string<C, T, A>& b);\n"
        + "".join(
            f"template <class C, class T, class A> bool operator{op}(\n  {a}, {b});\n"
            for op in ("==", "!=", "<")
            for a, b in (
                ("const basic_string<C, T, A>& a", "const basic_string<C, T, A>& b"),
                ("const basic_string<C, T, A>& a", "const C* b"),
                ("const C* a", "const basic_string<C, T, A>& b"),
            )
        )
        + "".join(f"string to_string({t} v);\n" for t in ("int", "long", "long long", "double"))
        + "int stoi(const string& s); long stol(const string& s); float stof(const string& s);\n"
        "double stod(const string& s);\n",
    ),
    "vector": (
        (),
        "template <class V, class A> class vector {\n"
        "public:\n"
        "  typedef V value_type; typedef size_t size_type; typedef V& reference;\n"
        "  typedef const V& const_reference; typedef V* iterator;\n"
        "  typedef const V* const_iterator;\n"
        "  vector(); explicit vector(size_type n); vector(size_type n, const V& v);\n"
        "  vector(const vector& o); ~vector(); vector& operator=(const vector& o);\n"
        "  size_type size() const; size_type capacity() const; bool empty() const;\n"
        "  V& operator[](size_type i); const V& operator[](size_type i) const;\n"
        "  V& at(size_type i); const V& at(size_type i) const; V* data(); const V* data() const;\n"
        "  V& front(); const V& front() const; V& back(); const V& back() const;\n"
        "  iterator begin(); iterator end(); const_iterator begin() const;\n"
        "  const_iterator end() const; void push_back(const V& v); void pop_back();\n"
        "  template <class... Args> void emplace_back(Args&&... args); void clear();\n"
        "  void resize(size_type n); void resize(size_type n, const V& v);\n"
        "  void reserve(size_type n);\n"
        "};\n",
    ),
    "ostream": (
        (),
        "template <class C, class T> class basic_ostream {\n"
        "public:\n"
        + "".join(f"  basic_ostream& operator<<({t} v);\n" for t in _ARITHMETIC)
        + "  basic_ostream& operator<<(const void* p);\n"
        "  basic_ostream& operator<<(basic_ostream& (*manipulator)(basic_ostream&));\n"
        "  basic_ostream& put(C c); basic_ostream& write(const C* s, streamsize n);\n"
        "  basic_ostream& flush();\n"
        "};\n"
        "template <class C, class T> basic_ostream<C, T>& operator<<(\n"
        "  basic_ostream<C, T>& os, const C* s);\n"
        "template <class C, class T> basic_ostream<C, T>& operator<<(\n"
        "  basic_ostream<C, T>& os, C c);\n"
        "template <class C, class T, class A> basic_ostream<C, T>& operator<<(\n"
        "  basic_ostream<C, T>& os, const basic_string<C, T, A>& s);\n"
        "template <class C, class T> basic_ostream<C, T>& endl(basic_ostream<C, T>& os);\n"
        "template <class C, class T> basic_ostream<C, T>& ends(basic_ostream<C, T>& os);\n"
        "template <class C, class T> basic_ostream<C, T>& flush(basic_ostream<C, T>& os);\n",
    ),
    "istream": (
        ("ostream",),
        "template <class C, class T> class basic_istream {\n"
        "public:\n"
        + "".join(f"  basic_istream& operator>>({t}& v);\n" for t in _ARITHMETIC)
        + "  basic_istream& get(C& c); basic_istream& read(C* s, streamsize n);\n"
        "  basic_istream& getline(C* s, streamsize n);\n"
        "};\n"
        "template <class C, class T> class basic_iostream\n"
        "  : public basic_istream<C, T>, public basic_ostream<C, T> {};\n"
        "template <class C, class T, class A> basic_istream<C, T>& getline(\n"
        "  basic_istream<C, T>& is, basic_string<C, T, A>& s);\n",
    ),
    "sstream": (
        ("istream",),
        "".join(
            f"template <class C, class T, class A> class basic_{c}\n"
            f"  : public basic_{base}<C, T> {{\n"
            "public:\n"
            f"  basic_{c}(); explicit basic_{c}(const basic_string<C, T, A>& s);\n"
            "  basic_string<C, T, A> str() const; void str(const basic_string<C, T, A>& s);\n"
            "};\n"
            for c, base in (
                ("istringstream", "istream"),
                ("ostringstream", "ostream"),
                ("stringstream", "iostream"),
            )
        ),
    ),
    "exception": (
        (),
        "class exception {\n"
        "public:\n"
        "  exception(); exception(const exception& o); virtual ~exception();\n"
        "  exception& operator=(const exception& o); virtual const char* what() const;\n"
        "};\n",
    ),
    "stdexcept": (
        ("string",),
        "".join(
            f"class {c} : public exception {{\n"
            "public:\n"
            f"  explicit {c}(const string& what); explicit {c}(const char* what);\n"
            "};\n"
            for c in STDEXCEPT_CLASSES
        ),
    ),
}
