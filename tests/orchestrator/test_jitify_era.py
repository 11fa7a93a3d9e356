"""Code written for Jitify: C++11/14 sources with CCCL 3 headers, and user specializations of std
templates. Kernels are our own, each reproducing a construct that real Jitify-era code used
(the README lists the code bases tried). Compile-level: no GPU needed."""

import subprocess
import sys
import warnings

import pytest

import cupy_rawcode
from cupy_rawcode.cli import main as cli_main
from cupy_rawcode.headers.standard import (
    NO_FLOOR,
    Floor,
    StandardRaisedWarning,
    effective_std,
    guard_year,
)
from cupy_rawcode.key import manifest
from cupy_rawcode.key.request import cache_key
from cupy_rawcode.toolkit.specializable import TEMPLATES, specialized_names

pytestmark = pytest.mark.filterwarnings(
    "ignore::cupy_rawcode.headers.standard.StandardRaisedWarning"
)


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    """The raise warning is once per process: each test starts with none given yet."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())
    monkeypatch.delenv("CUPY_RAWCODE_RAISE_STD", raising=False)


def compile_ok(src: str, options=(), **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = cupy_rawcode.compile(src, arch="sm_90", options=options, **kw)
    assert res.code
    return res, [w for w in caught if issubclass(w.category, StandardRaisedWarning)]


# --- part 1: the standard ---------------------------------------------------------------

# A C++11 stencil kernel as code generators wrote them: fixed-width types, `register`, and a
# check of the standard it is compiled at.
STENCIL = r"""
#include <cstdint>
%s
extern "C" __global__ void stencil(const double* __restrict__ in, double* out, int64_t n) {
    static_assert(__cplusplus %s, "standard");
    register int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1) out[i] = 0.25 * in[i - 1] + 0.5 * in[i] + 0.25 * in[i + 1];
}
"""


@pytest.mark.parametrize(
    "options, include, asked",
    [
        (("-std=c++11",), "", "c++11"),
        (("--std=c++11",), "#include <type_traits>", "c++11"),
        (("-std=c++14",), "#include <cmath>", "c++14"),
        (("-std=c++03",), "#include <limits>", "c++03"),
        (
            ("--std", "c++11", "-w", "-use_fast_math"),
            "#include <cub/warp/warp_reduce.cuh>",
            "c++11",
        ),
    ],
)
def test_old_standard_with_cccl_compiles_at_the_floor_with_one_warning(options, include, asked):
    res, raised = compile_ok(STENCIL % (include, ">= 201703L"), options)
    assert len(raised) == 1
    msg = str(raised[0].message)
    assert f"-std={asked}" in msg and "-std=c++17" in msg and "cpp_dialect.h" in msg
    assert "CUPY_RAWCODE_RAISE_STD=0" in msg and "register" in msg


@pytest.mark.parametrize("std, year", [("c++11", "201103L"), ("c++14", "201402L")])
def test_old_standard_kept_when_no_header_needs_more(std, year):
    src = (
        r"""
    extern "C" __global__ void k(float* x) {
        static_assert(__cplusplus == %s, "kept");
        x[0] = 1.0f;
    }"""
        % year
    )
    _, raised = compile_ok(src, (f"-std={std}",))
    assert raised == []


def test_a_header_a_raised_standard_reaches_raises_it_further(tree):
    """At the standard the closure asks for, a branch on ``__cplusplus`` may reach a header
    that asks for more: the floor is read again there (C++14 -> C++17 -> C++20)."""
    guard = "#if __cplusplus < {}L\n#error needs {}\n#endif\n"
    root = tree(
        {
            "n17.h": guard.format(201703, "C++17"),
            "n20.h": guard.format(202002, "C++20"),
        }
    )
    src = (
        '#include "n17.h"\n#if __cplusplus >= 201703L\n#include "n20.h"\n#endif\n'
        'extern "C" __global__ void k(int* p) { static_assert(__cplusplus >= 202002L, ""); }\n'
    )
    _, raised = compile_ok(src, ("-std=c++14", f"-I{root}"))
    assert len(raised) == 1 and "c++20" in str(raised[0].message)


def test_one_warning_per_process_for_the_same_standards():
    _, first = compile_ok(STENCIL % ("", ">= 201703L"), ("-std=c++11",))
    _, again = compile_ok(STENCIL % ("#include <limits>", ">= 201703L"), ("-std=c++11",))
    assert len(first) == 1 and again == []


def test_raise_off_compiles_as_asked_and_says_what_to_do(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_RAISE_STD", "0")
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.compile(STENCIL % ("", ">= 201703L"), arch="sm_90", options=("-std=c++11",))
    assert "requires at least C++" in str(e.value)
    assert "CUPY_RAWCODE_RAISE_STD" in str(e.value) and "-std=c++17" in str(e.value)


@pytest.mark.parametrize(
    "a, b, equal",
    [
        # what NVRTC receives is the same: C++17 and `register` defined away
        (("-std=c++11",), ("-std=c++14",), True),
        (("-std=c++11",), ("--std=c++11",), True),
        # C++17 asked: no `register` macro, another compile
        (("-std=c++11",), ("-std=c++17",), False),
    ],
)
def test_key_records_the_standard_used(a, b, equal):
    src = STENCIL % ("", ">= 201703L")
    ka, kb = cache_key(src, arch="sm_90", options=a), cache_key(src, arch="sm_90", options=b)
    assert (ka == kb) is equal


def test_key_differs_when_raising_is_off(monkeypatch):
    src = STENCIL % ("", ">= 201103L")
    on = cache_key(src, arch="sm_90", options=("-std=c++11",))
    monkeypatch.setenv("CUPY_RAWCODE_RAISE_STD", "0")
    assert cache_key(src, arch="sm_90", options=("-std=c++11",)) != on


def test_manifest_answers_with_the_same_floor():
    src = STENCIL % ("#include <type_traits>", ">= 201703L")
    first = cache_key(src, arch="sm_90", options=("-std=c++11",))
    manifest._memo.clear()  # a new process: only the manifest on disk knows the closure
    assert cache_key(src, arch="sm_90", options=("-std=c++11",)) == first


def test_entry_points_compile_old_standards(tmp_path):
    src = STENCIL % ("#include <type_traits>", ">= 201703L")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StandardRaisedWarning)
        cupy_rawcode.RawKernel(src, "stencil", options=("-std=c++11",)).compile(arch="sm_90")
        cupy_rawcode.RawModule(code=src, options=("--std=c++11",)).compile(arch="sm_90")
        f = tmp_path / "stencil.cu"
        f.write_text(src)
        assert cli_main(["compile", str(f), "--arch", "sm_90", "-std=c++11"]) == 0


@pytest.mark.parametrize(
    "text, year",
    [
        (b"#if _CCCL_STD_VER < 2017\n#  error libcu++ requires at least C++ 17.\n#endif", 2017),
        (b"#  if _CCCL_STD_VER < 2017\n// why\n#    error Thrust requires at least C++17.\n", 2017),
        (b"#if _CCCL_STD_VER < 2011\n#  error libcu++ requires C++11 or later.\n", 2011),
        (b"#if __cplusplus < 202002L\n#error needs C++20\n#endif", 2020),
        # a deprecation message is no floor
        (b"#if _CCCL_STD_VER < 2017\nLIBCUDACXX_DIALECT_DEPRECATION(C++ 17, C++ 14)\n", 0),
        (b"#if _CCCL_STD_VER >= 2017\n#error other\n#endif", 0),
        (b"int x;", 0),
    ],
)
def test_guard_year(text, year):
    assert guard_year(text) == year


@pytest.mark.parametrize(
    "asked, floor, on, used",
    [
        ("c++11", Floor(2017, "h"), True, "c++17"),
        ("c++14", Floor(2017, "h"), True, "c++17"),
        ("c++11", Floor(2017, "h"), False, "c++11"),
        ("c++11", Floor(2011, "h"), True, "c++11"),
        ("c++03", Floor(2011, "h"), True, "c++11"),
        ("c++17", Floor(2017, "h"), True, "c++17"),
        ("c++20", Floor(2017, "h"), True, "c++20"),
        ("c++11", NO_FLOOR, True, "c++11"),
    ],
)
def test_effective_std(asked, floor, on, used):
    assert effective_std(asked, floor, on) == used


# --- part 2: user specializations of std templates ----------------------------------------

# (specialization, a use that checks the user's is the one used and the library's still answers)
SPECIALIZATIONS = {
    "numeric_limits": (
        "namespace std { template <> class numeric_limits<Fixed> { public:"
        " static constexpr bool is_specialized = true; static constexpr int digits = 7;"
        " __device__ static constexpr Fixed max() { return Fixed{127}; } }; }",
        'static_assert(std::numeric_limits<Fixed>::digits == 7, "user\'s");'
        'static_assert(std::numeric_limits<const Fixed>::digits == 7, "cv");'
        'static_assert(std::numeric_limits<int>::digits == 31, "library\'s");'
        "out[0] = std::numeric_limits<Fixed>::max().v;",
    ),
    "hash": (
        "namespace std { template <> struct hash<Fixed> {"
        " __device__ size_t operator()(const Fixed& f) const { return f.v * 31u; } }; }",
        "out[0] = (int)std::hash<Fixed>{}(Fixed{3});",
    ),
    "iterator_traits": (
        "namespace std { template <> struct iterator_traits<Fixed> { using value_type = short;"
        " using difference_type = int; using pointer = short*; using reference = short&;"
        " using iterator_category = random_access_iterator_tag; }; }",
        'static_assert(sizeof(std::iterator_traits<Fixed>::value_type) == 2, "user\'s");'
        'static_assert(sizeof(std::iterator_traits<double*>::value_type) == 8, "library\'s");'
        "out[0] = 1;",
    ),
    "pointer_traits": (
        "namespace std { template <> struct pointer_traits<Fixed> { using element_type = short;"
        " using pointer = Fixed; using difference_type = int; }; }",
        'static_assert(sizeof(std::pointer_traits<Fixed>::element_type) == 2, "user\'s");'
        'static_assert(sizeof(std::pointer_traits<double*>::element_type) == 8, "library\'s");'
        "out[0] = 1;",
    ),
    "common_type": (
        "namespace std { template <> struct common_type<Fixed, int> { using type = long long; }; }",
        'static_assert(sizeof(std::common_type<Fixed, int>::type) == 8, "user\'s");'
        'static_assert(sizeof(std::common_type_t<Fixed, int>) == 8, "alias");'
        'static_assert(sizeof(std::common_type<char, double>::type) == 8, "library\'s");'
        "out[0] = 1;",
    ),
}

CASES = [
    (name, shim, using)
    for name, t in TEMPLATES.items()
    for shim in t.shims
    for using in (False, True)
]


def specialization_source(name: str, shim: str, using: bool, in_header: bool = False) -> str:
    spec, use = SPECIALIZATIONS[name]
    head = f"#include <{shim}>\n#include <cstddef>\n" + ("using namespace std;\n" if using else "")
    body = "struct Fixed { int v; };\n" + spec + "\n"
    if in_header:
        body = '#include "fixed.h"\n'
    return head + body + 'extern "C" __global__ void k(int* out) { %s }\n' % use


def test_table_covers_every_template():
    assert set(SPECIALIZATIONS) == set(TEMPLATES)


@pytest.mark.parametrize("name, shim, using", CASES)
def test_user_specialization_is_the_one_used(name, shim, using):
    compile_ok(specialization_source(name, shim, using))


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_specialization_in_a_user_header(tmp_path, name):
    spec, _ = SPECIALIZATIONS[name]
    (tmp_path / "fixed.h").write_text("#pragma once\nstruct Fixed { int v; };\n" + spec + "\n")
    shim = TEMPLATES[name].shims[0]
    compile_ok(specialization_source(name, shim, False, in_header=True), (f"-I{tmp_path}",))


@pytest.mark.parametrize("first", [True, False])
def test_specialization_with_cupy_workaround_header(first):
    """CuPy's carray.cuh brings cuda::std::numeric_limits into std with a using-declaration."""
    src = specialization_source("numeric_limits", "limits", False)
    src = (
        ("#include <cupy/carray.cuh>\n" + src)
        if first
        else src.replace('extern "C"', '#include <cupy/carray.cuh>\nextern "C"')
    )
    compile_ok(src)


def test_structured_bindings_of_a_user_tuple_like_type():
    src = r"""
    #include <utility>
    #include <tuple>
    struct P { int a; float b; };
    namespace std {
    template <> struct tuple_size<P> : integral_constant<size_t, 2> {};
    template <> struct tuple_element<0, P> { using type = int; };
    template <> struct tuple_element<1, P> { using type = float; };
    }
    template <size_t I> __device__ auto get(const P& p) { if constexpr (I == 0) return p.a; else return p.b; }
    extern "C" __global__ void k(float* out) {
        auto [i, f] = P{2, 0.5f};
        auto [x, y] = std::make_tuple(1, 2.0f);
        out[0] = i + f + x + y;
    }"""
    compile_ok(src)


def test_using_namespace_std_without_specialization_is_unambiguous():
    src = r"""
    #include <limits>
    #include <functional>
    #include <type_traits>
    using namespace std;
    extern "C" __global__ void k(int* out) {
        out[0] = numeric_limits<int>::max() + (int)is_same<common_type<int, int>::type, int>::value;
    }"""
    compile_ok(src)


def test_key_unchanged_without_specialization():
    plain = '#include <limits>\nextern "C" __global__ void k(int* o) { o[0] = std::numeric_limits<int>::max(); }'
    spec = plain.replace(
        "extern",
        "struct Fixed{};\nnamespace std { template <> class numeric_limits<Fixed> {}; }\nextern",
    )
    from cupy_rawcode.key.request import compute_key, make_request

    opts_plain = compute_key(make_request(plain, arch="sm_90")).options
    opts_spec = compute_key(make_request(spec, arch="sm_90")).options
    assert not any(n.startswith("CUPY_RAWCODE_SPECIALIZED_") for n, _ in opts_plain.macros)
    assert ("CUPY_RAWCODE_SPECIALIZED_numeric_limits", "1") in opts_spec.macros


@pytest.mark.parametrize(
    "text, names",
    [
        (b"namespace std { template <> class numeric_limits<X> {}; }", ("numeric_limits",)),
        (b"namespace std {\ntemplate<>\nstruct hash<K>\n{};\n}", ("hash",)),
        (b"template <> struct std::hash<K> {};", ("hash",)),
        (b"template <> struct ::std::iterator_traits<I> {};", ("iterator_traits",)),
        (
            b"namespace std { template <class T> struct common_type<W<T>, int> {}; }",
            ("common_type",),
        ),
        # a same-named template of another namespace
        (b"namespace mine { template <> struct hash<K> {}; }", ()),
        # a use is no specialization
        (b"namespace std { int f() { return numeric_limits<int>::max(); } }", ()),
        (b"int x;", ()),
    ],
)
def test_specialized_names(text, names):
    assert specialized_names(text) == names


def test_cli_process_warns_once(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text(STENCIL % ("#include <type_traits>", ">= 201703L"))
    env_run = subprocess.run(
        [
            sys.executable,
            "-m",
            "cupy_rawcode.cli",
            "compile",
            str(f),
            "--arch",
            "sm_90",
            "-std=c++11",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert env_run.returncode == 0, env_run.stderr
    assert env_run.stderr.count("StandardRaisedWarning") == 1


# --- options of Jitify itself ------------------------------------------------------------


@pytest.mark.parametrize(
    "jitify_options",
    [
        ("--remove-unused-globals",),
        ("-remove-unused-globals", "--remove-unused-globals"),
        ("--no-replace-pragma-once", "-no-preinclude-workarounds"),
        ("--no-system-headers-workaround", "--no-builtin-headers"),
    ],
)
def test_jitify_only_options_are_accepted_and_change_nothing(jitify_options):
    src = STENCIL % ("#include <cstdint>", ">= 201703L")
    base = ("-std=c++11",)
    compile_ok(src, base + jitify_options)
    assert cache_key(src, arch="sm_90", options=base + jitify_options) == cache_key(
        src, arch="sm_90", options=base
    )


def test_cxx11_curand_device_api():
    """A C++11 kernel drawing numbers with cuRAND's device API (Jitify's own tests did)."""
    src = r"""
    #include <curand_kernel.h>
    extern "C" __global__ void draw(float* out, unsigned long long seed) {
        curandState_t s;
        curand_init(seed, threadIdx.x, 0, &s);
        out[threadIdx.x] = curand_uniform(&s);
    }"""
    compile_ok(src, ("-std=c++11",))
