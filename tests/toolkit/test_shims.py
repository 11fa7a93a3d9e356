"""Standard header shims: each supported header compiles with its main names, each declaration
stub compiles when included and fails with a hint when one of its names is used, user and real
headers win over shims, and the README's list is generated from them."""

from pathlib import Path

import pytest
from conftest import ROOT

import cupy_rawcode
from cupy_rawcode.compiler.hints import stub_hints
from cupy_rawcode.toolkit import jitify_classes, shimdata, shims
from cupy_rawcode.toolkit.record import toolchain

# header -> device code using its main names (inside `__global__ void k(float* p, int* q)`)
USES = {
    "type_traits": "static_assert(std::is_same<int, int>::value && std::is_floating_point_v<float>"
    ' && !std::is_pointer<int>::value, "");'
    " using T = std::conditional_t<true, std::decay_t<const int&>, float>;"
    ' static_assert(std::is_same_v<T, int>, ""); q[0] = std::is_signed<T>::value;',
    "limits": "p[0] = std::numeric_limits<float>::max() + std::numeric_limits<float>::epsilon();"
    " q[0] = std::numeric_limits<int>::max(); p[1] = std::numeric_limits<double>::lowest();",
    "utility": "std::pair<int, float> a = std::make_pair(1, 2.0f); std::swap(q[0], q[1]);"
    " auto b = std::move(a); p[0] = b.second + std::forward<int>(b.first);"
    ' static_assert(std::integer_sequence<int, 1, 2>::size() == 2, "");',
    "tuple": "std::tuple<int, float> t = std::make_tuple(1, 2.0f); auto [a, b] = t;"
    " q[0] = std::get<0>(t) + a + std::tuple_size<decltype(t)>::value; int x; float y;"
    " std::tie(x, y) = t; p[0] = b + y + x;",
    "array": "std::array<int, 4> a{1, 2, 3, 4}; q[0] = a[2] + (int)a.size() + a.back();",
    "complex": "std::complex<float> z(p[0], 1.0f); z = z * std::conj(z); p[1] = std::abs(z) + z.real();",
    "functional": "q[0] = std::plus<int>()(1, 2) + std::multiplies<int>()(3, 4)"
    " + std::less<int>()(1, 2) + std::greater<>()(2, 1);",
    "iterator": "int a[4] = {1, 2, 3, 4}; auto it = std::begin(a); std::advance(it, 2);"
    " q[0] = *it + (int)std::distance(std::begin(a), std::end(a));"
    " q[1] = *std::reverse_iterator<int*>(std::end(a));"
    ' static_assert(std::is_same<std::iterator_traits<int*>::value_type, int>::value, "");',
    "initializer_list": "std::initializer_list<int> il = {1, 2, 3}; q[0] = (int)il.size() + *il.begin();",
    "numeric": "int a[3] = {1, 2, 3}; q[0] = std::accumulate(a, a + 3, 0) + std::gcd(12, 18)"
    " + std::lcm(4, 6); std::iota(a, a + 3, 5); q[1] = a[2];",
    "memory": "q[0] = *std::addressof(q[1]);"
    ' static_assert(std::is_same<std::pointer_traits<int*>::element_type, int>::value, "");',
    "new": "float* f = new (p) float(3.0f); p[1] = *f;",
    "algorithm": "q[0] = std::min(q[1], q[2]) + std::max(1, 2) + std::clamp(q[3], 0, 10);"
    " int a[4] = {4, 1, 3, 2}; q[1] = *std::min_element(a, a + 4)"
    " + *std::max_element(a, a + 4); std::fill(a, a + 2, 7); std::swap(a[0], a[3]);"
    " q[2] = (int)(std::find(a, a + 4, 3) - a) + std::count(a, a + 4, 7);"
    " int s[3] = {1, 3, 5}; q[3] = (int)(std::lower_bound(s, s + 3, 3) - s);",
    "bit": "q[0] = std::popcount(7u) + std::countl_zero(1u) + (int)std::bit_width(8u);"
    " p[0] = std::bit_cast<float>(q[1]);",
    "span": "std::span<float> s(p, 4); p[0] = s[1] + (float)s.size() + s.subspan(1).front();",
    "optional": "std::optional<int> o = 3; std::optional<int> e = std::nullopt;"
    " q[0] = o.value_or(0) + e.value_or(5) + o.has_value();",
    "variant": "std::variant<int, float> v = 1.0f; p[0] = std::get<float>(v);"
    " q[0] = std::holds_alternative<float>(v) + (int)v.index();",
    "ratio": "using R = std::ratio_add<std::ratio<1, 3>, std::ratio<1, 6>>; q[0] = R::num * 10 + R::den;",
    "atomic": "std::atomic_ref<int> a(q[0]); a.fetch_add(1); q[1] = a.load();",
    "chrono": "std::chrono::duration<int> d(2); q[0] = (int)std::chrono::milliseconds(d).count();",
    "bitset": "std::bitset<8> b(5); q[0] = (int)b.count() + b.test(0);",
    "concepts": 'static_assert(std::same_as<int, int> && std::integral<int>, "");',
    "expected": "std::expected<int, int> e = 3; std::expected<int, int> u = std::unexpected<int>(4);"
    " q[0] = e.value() + u.error();",
    "mdspan": "std::mdspan<float, std::dextents<int, 2>> m(p, 2, 3); p[0] = m(1, 2) + m.extent(1);",
    "source_location": "q[0] = (int)std::source_location::current().line();",
    "barrier": 'static_assert(sizeof(std::barrier<>) > 0, "");',
    "latch": 'static_assert(sizeof(std::latch) > 0, "");',
    "semaphore": 'static_assert(sizeof(std::binary_semaphore) > 0, "");',
    "numbers": "p[0] = std::numbers::pi_v<float> + (float)std::numbers::e;",
    "string_view": 'std::string_view s("abc"); q[0] = (int)s.size() + s[1];',
    "cstdint": "int64_t a = 1; std::int32_t b = 2; uint8_t c = 3; std::uintptr_t d = 4;"
    " q[0] = (int)(a + b + c + d) + (INT32_MAX > 0);",
    "cstddef": "size_t a = 1; std::size_t b = 2; ptrdiff_t c = 3; std::nullptr_t n = nullptr;"
    " std::byte y{4}; q[0] = (int)(a + b + c) + (n == nullptr) + std::to_integer<int>(y);",
    "climits": "q[0] = INT_MAX - CHAR_BIT + (LLONG_MAX > 0) + (UINT_MAX > 0) + SHRT_MIN;",
    "cfloat": "p[0] = FLT_MAX - FLT_MIN + (float)DBL_EPSILON + FLT_EPSILON + FLT_MANT_DIG;",
    "cmath": "p[0] = std::sin(p[1]) + std::sqrt(p[2]) + std::fabs(p[3]) + std::pow(p[4], 2.0f)"
    " + std::floor(p[5]) + std::fmax(p[6], p[7]) + std::isnan(p[8]) + std::exp(p[9]);"
    " double d = std::sqrt(2.0) + std::log(3.0) + std::abs(-1.0) + std::erf(0.5) + std::exp2(2.0);"
    " int e; p[10] = (float)d + sinf(p[1]) + std::frexp(1.5f, &e) + std::lgamma(p[2]);",
    "cassert": "assert(q[0] >= 0);",
    "cstdlib": "q[0] = std::abs(q[1]) + (int)std::labs(-3L) + abs(q[2]);",
    "cstring": "std::memcpy(p, p + 1, sizeof(float)); std::memset(q, 0, sizeof(int)); memcpy(p, p + 2, 4);",
    "cstdio": 'std::printf("%d\\n", q[0]); printf("%f\\n", p[0]);',
    "ctime": "clock_t t = std::clock(); q[0] = (int)(t + clock64());",
    "cstdarg": "std::va_list a; q[0] = (int)sizeof(a) + (int)sizeof(va_list);",
}
C_NAMES = shimdata.C_HEADERS
_C_GLOBAL = {
    "cstdint": "int32_t g = 1; q[0] = g;",
    "cstddef": "size_t g = 1; q[0] = (int)g;",
    "climits": "q[0] = INT_MAX;",
    "cfloat": "p[0] = FLT_MAX;",
    "cmath": "p[0] = sinf(p[1]);",
    "cassert": "assert(q[0] >= 0);",
    "cstdlib": "q[0] = abs(q[1]);",
    "cstring": "memset(q, 0, 4);",
    "cstdio": 'printf("x");',
    "ctime": "q[0] = (int)clock();",
    "cstdarg": "va_list a; q[0] = (int)sizeof(a);",
}


def _kernel(includes, body):
    inc = "".join(f"#include <{h}>\n" for h in includes)
    return f"{inc}__global__ void k(float* p, int* q) {{ {body} }}\n"


def _cccl_has(name):
    shim = shimdata.SUPPORTED[name]
    roots = [d.path for d in toolchain().system_dirs]
    return all(any((Path(r) / "cuda" / "std" / h).is_file() for r in roots) for h in shim.backing)


def test_every_supported_header_has_a_use_case():
    assert set(USES) == set(shimdata.SUPPORTED) and set(C_NAMES.values()) <= set(shimdata.SUPPORTED)


@pytest.mark.parametrize("name", sorted(shimdata.SUPPORTED) + sorted(C_NAMES))
def test_supported_header_compiles_with_its_main_names(name):
    if not _cccl_has(C_NAMES.get(name, name)):
        pytest.skip(f"<{name}> needs a newer CCCL than {toolchain().cccl_version}")
    body = USES.get(name) or _C_GLOBAL[C_NAMES[name]]
    cupy_rawcode.compile(_kernel([name], body), arch="sm_90")


# Every header Jitify2 supplied to NVRTC (facts.md): each must compile when included.
JITIFY_HEADERS = (
    "assert.h cassert float.h cfloat limits.h climits math.h cmath stddef.h cstddef stdint.h "
    "cstdint stdio.h cstdio stdlib.h cstdlib string.h cstring stdarg.h cstdarg time.h ctime "
    "algorithm array complex initializer_list iostream istream iterator limits mutex ostream "
    "sstream exception stdexcept string tuple utility type_traits vector memory.h functional map "
    "stack iomanip typeinfo memory new sys/time.h numeric cxxabi.h"
).split()

# stub header -> a use of one of its names (inside `__global__ void k(float* p, int* q)`)
STUB_USES = {
    "iosfwd": "std::streamsize n = 3; std::fpos<int>* f = nullptr; q[0] = (int)n + (f != nullptr); f->x();",
    "ios": "std::ios_base* b = nullptr; q[0] = b->flags();",
    "streambuf": "std::streambuf s;",
    "istream": "int x; *(std::istream*)p >> x;",
    "ostream": "std::ostream& o = *(std::ostream*)p; o << q[0];",
    "iostream": "std::cout << q[0] << std::endl;",
    "sstream": "std::ostringstream s; s << p[0];",
    "fstream": 'std::ofstream f("out.txt");',
    "iomanip": "q[0] = (int)sizeof(std::setw(3));",
    "string": 'std::string s("abc"); q[0] = (int)s.size();',
    "vector": "std::vector<int> v; v.push_back(q[0]);",
    "deque": "std::deque<int> d;",
    "list": "std::list<int> l;",
    "forward_list": "std::forward_list<int> l;",
    "map": "std::map<int, float> m; m[1] = p[0];",
    "set": "std::set<int> s;",
    "unordered_map": "std::unordered_map<int, int> m;",
    "unordered_set": "std::unordered_set<int> s;",
    "stack": "std::stack<int> s; s.push(1);",
    "queue": "std::priority_queue<int> h;",
    "exception": "std::exception e;",
    "stdexcept": 'std::runtime_error e("bad");',
    "typeinfo": "q[0] = (int)sizeof(std::type_info);",
    "mutex": "std::mutex m; std::lock_guard<std::mutex> g(m);",
    "thread": "std::thread t;",
    "condition_variable": "std::condition_variable c;",
    "future": "std::future<int> f;",
    "regex": 'std::regex r("a+");',
    "locale": "std::locale l;",
    "filesystem": "std::filesystem::path f;",
    "random": "std::mt19937 g(1); q[0] = (int)g();",
    "sys/time.h": "timeval t; gettimeofday(&t, 0); q[0] = (int)t.tv_sec;",
    "cxxabi.h": 'q[0] = (int)(abi::__cxa_demangle("x", 0, 0, 0) != 0);',
}


def test_every_stub_has_a_use_case():
    assert set(STUB_USES) == set(shimdata.STUBS)


def test_every_jitify_header_is_a_shim_or_a_stub():
    known = set(shimdata.SUPPORTED) | set(shimdata.C_HEADERS) | set(shimdata.STUBS)
    assert [h for h in JITIFY_HEADERS if h not in known] == []


@pytest.mark.parametrize("name", sorted(set(JITIFY_HEADERS) | set(shimdata.STUBS)))
def test_header_compiles_when_included(name):
    """Included and unused, as a library header includes it: compiles, and after a stub the
    std:: integer types a real <iostream> or <vector> makes reachable are there."""
    body = (
        "std::size_t n = 2; std::int32_t m = 3; q[0] = (int)(n + m);"
        if name in shimdata.STUBS
        else "q[0] = 1;"
    )
    cupy_rawcode.compile(_kernel([name], body), arch="sm_90")


@pytest.mark.parametrize("stubs_first", [True, False])
def test_all_stubs_together_with_every_shim(stubs_first):
    """The stubs' std:: declarations and the shims' cuda::std names coexist in one source, in
    either order: libcudacxx's char_traits is still std::char_traits."""
    shim_names = [n for n in sorted(shimdata.SUPPORTED) if _cccl_has(n)]
    names = (
        sorted(shimdata.STUBS) + shim_names if stubs_first else shim_names + sorted(shimdata.STUBS)
    )
    body = "p[0] = std::sin(p[1]) + std::abs(std::complex<float>(p[2], 1.0f));"
    if "string_view" in shim_names:
        body += ' q[0] = (int)std::char_traits<char>::length("abc") + (int)std::string_view("ab").size();'
    cupy_rawcode.compile(_kernel(names, body), arch="sm_90")


@pytest.mark.parametrize("name", sorted(shimdata.STUBS))
def test_a_stub_name_used_fails_with_the_hint(name):
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.compile(_kernel([name], STUB_USES[name]), arch="sm_90")
    assert f"<{name}> has no device implementation: {shimdata.STUBS[name].advice}" in str(e.value)


@pytest.mark.parametrize(
    "log, hints",
    [
        (
            'kernel.cu(3): error: incomplete type "std::vector<int, cuda::std::__4::allocator<int>>" '
            "is not allowed\n  std::vector<int> v;\n",
            ["vector"],
        ),
        ('kernel.cu(3): error: namespace "std" has no member "cout"\n', ["iostream"]),
        (
            'kernel.cu(3): error: incomplete type "std::stack<int, std::deque<int, '
            'cuda::std::__4::allocator<int>>>" is not allowed\n',
            ["stack"],
        ),
        (
            'kernel.cu(3): error: no operator "<<" matches these operands\n'
            "            operand types are: std::ostringstream << float\n",
            ["sstream"],
        ),
        ('kernel.cu(3): error: identifier "gettimeofday" is undefined\n', ["sys/time.h"]),
        ('kernel.cu(3): error: namespace "abi" has no member "__cxa_demangle"\n', ["cxxabi.h"]),
        (
            'kernel.cu(3): error: incomplete type "std::string" is not allowed\n'
            'kernel.cu(4): error: incomplete type "std::mutex" is not allowed\n'
            'kernel.cu(5): error: incomplete type "std::string" is not allowed\n',
            ["string", "mutex"],
        ),
        # not a stub's name: cuda::std's own, a warning, the echoed source line, another identifier
        ('kernel.cu(3): error: incomplete type "cuda::std::__4::vector" is not allowed\n', []),
        ('kernel.cu(3): warning: variable "std::string" was declared but never referenced\n', []),
        ('kernel.cu(3): error: identifier "foo" is undefined\n    std::string s; foo();\n', []),
        ('kernel.cu(3): error: identifier "vector" is undefined\n', []),
        ("", []),
    ],
)
def test_stub_hints_name_the_header_of_the_name_used(log, hints):
    expected = "\n".join(
        f"<{h}> has no device implementation: {shimdata.STUBS[h].advice}" for h in hints
    )
    assert stub_hints(log) == expected


def _other_roots():
    from cupy_rawcode.toolkit.discovery import source_dirs

    roots = []
    for source in ("cupy", "toolkit"):
        try:
            cccl = source_dirs(source).get("cccl")
            if cccl:  # CuPy's CCCL is three dirs; the toolkit's CUDA headers may not match NVRTC
                roots.append("cupy,wheel" if source == "cupy" else f"cccl={cccl[0]},wheel")
        except Exception:  # cupy not importable: that root is simply not there
            pass
    return roots


@pytest.mark.parametrize("source", _other_roots())
def test_all_shims_together_under_other_cccl_roots(source, monkeypatch):
    """CuPy's bundled CCCL and the toolkit's (when present) as well as the wheel's."""
    monkeypatch.setenv(
        "CUPY_RAWCODE_HEADER_SOURCES", source
    )  # CCCL from there, CUDA from the wheel
    names = [n for n in USES if _cccl_has(n)]
    body = " ".join("{ " + USES[n] + " }" for n in names)
    cupy_rawcode.compile(_kernel(names + sorted(C_NAMES), body), arch="sm_90")


@pytest.mark.parametrize(
    "includes",
    [
        ["type_traits", "type_traits"],
        ["type_traits", "cuda/std/type_traits"],
        ["cuda/std/type_traits", "type_traits"],
        ["cuda/std/tuple", "tuple", "utility", "cuda/std/utility"],
        ["cmath", "math.h", "complex", "cuda/std/cmath"],
    ],
)
def test_shims_mix_with_cuda_std_in_any_order(includes):
    body = (
        'static_assert(std::is_same<std::pair<int, int>, cuda::std::pair<int, int>>::value, "");'
        if "utility" in includes
        else 'static_assert(std::is_same<int, cuda::std::remove_cv_t<const int>>::value, "");'
        if "type_traits" in includes
        else "p[0] = std::sin(p[1]);"
    )
    cupy_rawcode.compile(_kernel(includes, body), arch="sm_90")


def test_user_header_wins_over_a_shim(tree):
    root = tree({"mine/type_traits": "#pragma once\n#define MY_TYPE_TRAITS 1\n"})
    src = _kernel(["type_traits"], "q[0] = MY_TYPE_TRAITS;")
    cupy_rawcode.compile(src, arch="sm_90", options=(f"-I{root / 'mine'}",))
    closure = cupy_rawcode.resolve(src, options=(f"-I{root / 'mine'}",))
    tags = {h.logical for h in closure.headers}
    assert "user0:type_traits" in tags and "shim:type_traits" not in tags


def test_shims_are_the_last_root():
    dirs = toolchain().system_dirs
    assert dirs[-1].tag == "shim"


def test_kernels_without_std_headers_do_not_reach_a_shim():
    for name in ("block_reduce.cu", "plain.cu", "complex.cu"):
        src = (ROOT / "bench" / "corpus" / name).read_text()
        closure = cupy_rawcode.resolve(src, exact=True)
        assert not [h.logical for h in closure.headers if h.logical.startswith("shim:")], name


def test_workaround_header_stays_tiny():
    text = (ROOT / "include" / "cupy_rawcode" / "workaround.h").read_text()
    assert "#include" not in text and len(text) < 1024


def test_include_dir_is_what_the_table_renders():
    include = ROOT / "include"
    on_disk = {str(p.relative_to(include)) for p in include.rglob("*") if p.is_file()}
    rendered = shims.files()
    assert on_disk - {"cupy_rawcode/workaround.h"} == set(rendered), (
        "run: python -m cupy_rawcode.toolkit.shims --write"
    )
    for rel, text in rendered.items():
        assert (include / rel).read_text() == text, (
            f"{rel} is stale: python -m cupy_rawcode.toolkit.shims --write"
        )


def test_readme_lists_the_headers_from_the_table():
    readme = (ROOT / "README.md").read_text()
    assert shims.markdown() in readme, (
        "README header list is stale: python -m cupy_rawcode.toolkit.shims --markdown"
    )


# header code shared with host code, as QUDA's tune_key.h and kernel_helper.h are: it parses
# under jitify=True (Jitify's own headers defined these classes) and not without it
SHARED_HOST_CODE = {
    "ostream": "struct Key { char name[8]; int n; friend std::ostream& operator<<(std::ostream& o,"
    ' const Key& k) { o << "name = " << k.name << ", " << k.n << std::endl; return o; } };',
    "string": "struct Named { const std::string name; Named(const char* n) : name(n) {}"
    " const char* c() const { return name.c_str(); } bool is(const char* n) const"
    ' { return name == n || "x" != name; } };',
    "vector": "struct Holder { std::vector<float*> parts; int n; int count() const"
    " { return (int)parts.size(); } };",
    "sstream": "inline std::string describe(int n) { std::ostringstream s; s << n; return s.str(); }",
    "stdexcept": 'struct Check { std::runtime_error error; Check() : error("none") {}'
    " const char* why() const { return error.what(); } };",
    "istream": "inline int read_one(std::istream& is) { int x; is >> x; return x; }",
}


@pytest.mark.parametrize("name", sorted(SHARED_HOST_CODE))
@pytest.mark.parametrize("jitify", [True, False])
def test_stub_classes_hold_members_under_jitify_as_jitifys_did(name, jitify):
    source = (
        f"#include <{name}>\n#include <string>\n{SHARED_HOST_CODE[name]}\n"
        'extern "C" __global__ void k(int* q) { q[0] = 1; }\n'
    )
    module = cupy_rawcode.RawModule(code=source, jitify=jitify)
    if jitify:
        module.compile(arch="sm_90")
    else:
        with pytest.raises(cupy_rawcode.CompileError):
            module.compile(arch="sm_90")


def test_every_header_with_jitify_classes_has_shared_host_code():
    assert set(jitify_classes.JITIFY_DECLS) - {"exception"} == set(SHARED_HOST_CODE)


@pytest.mark.parametrize("name", sorted(jitify_classes.JITIFY_DECLS))
def test_a_stub_member_called_under_jitify_fails_with_the_hint(name):
    """Declared, not defined: ptxas finds the call unresolved, and the error says why."""
    module = cupy_rawcode.RawModule(code=_kernel([name], STUB_USES[name]), jitify=True)
    with pytest.raises(cupy_rawcode.CompileError) as e:
        module.compile(arch="sm_90")
    assert "Unresolved extern function" in str(e.value)
    assert (
        f"<{name}> has no device implementation (under jitify=True its classes are declared"
        in str(e.value)
    )


def test_a_stub_member_called_with_rdc_fails_with_the_hint():
    """With -rdc=true nvJitLink finds the call undefined ('Undefined reference to'): the same
    hint."""
    source = _kernel(["vector"], STUB_USES["vector"])
    module = cupy_rawcode.RawModule(code=source, jitify=True, options=("-rdc=true",))
    with pytest.raises(cupy_rawcode.CompileError) as e:
        module.compile(arch="sm_90")
    assert "<vector> has no device implementation (under jitify=True" in str(e.value)
