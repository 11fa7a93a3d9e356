import pytest
from conftest import bare_nvrtc

from cupy_rawcode.headers.options import (
    NEXT_VALUE,
    NotAnOptionError,
    is_arch,
    normalize_arch,
    parse_options,
    wants_rdc,
)


@pytest.mark.parametrize(
    "options, field, expected",
    [
        (("-I", "/inc"), "include_dirs", ("/inc",)),
        (("-I/inc",), "include_dirs", ("/inc",)),
        (("--include-path=/inc",), "include_dirs", ("/inc",)),
        (("-isystem", "/s"), "isystem_dirs", ("/s",)),
        (("-isystem/s",), "isystem_dirs", ("/s",)),
        # one string with spaces after the flag, as NVRTC reads it
        (("-I /inc",), "include_dirs", ("/inc",)),
        (("-I  /inc ",), "include_dirs", ("/inc",)),
        (("-isystem /s",), "isystem_dirs", ("/s",)),
        (("-D N=4",), "macros", (("N", "4"),)),
        (("-D  N",), "macros", (("N", "1"),)),
        (("-DN=1", "-U N"), "macros", (("N", None),)),
        (("-DN=4",), "macros", (("N", "4"),)),
        (("-D", "N"), "macros", (("N", "1"),)),
        (("--define-macro=N=4",), "macros", (("N", "4"),)),
        (("-DN=1", "-UN"), "macros", (("N", None),)),
        (("-UN", "-DN=2"), "macros", (("N", "2"),)),
        (("--undefine-macro=N",), "macros", (("N", None),)),
        # function-like, as NVRTC takes them: the name with its parameter list is the head
        (("-DSQ(a)=((a)*(a))",), "macros", (("SQ(a)", "((a)*(a))"),)),
        (("-DF( a , b )=a+b",), "macros", (("F( a , b )", "a+b"),)),
        (("-DF(x)",), "macros", (("F(x)", "1"),)),
        (("-DF()=2",), "macros", (("F()", "2"),)),
        (("-DV(a, ...)=a",), "macros", (("V(a, ...)", "a"),)),
        (("-DF(x)=3", "-UF"), "macros", (("F", None),)),
        (("-DF(x)=3", "-DF=4"), "macros", (("F", "4"),)),
        (("-std=c++14",), "std", "c++14"),
        (("--std=c++20",), "std", "c++20"),
        ((), "std", "c++17"),
        (("-arch=sm_80",), "arch", "sm_80"),
        (("--gpu-architecture=compute_90",), "arch", "compute_90"),
        (("-include", "pre.h"), "pre_includes", ("pre.h",)),
        (("--pre-include=pre.h",), "pre_includes", ("pre.h",)),
        (("-default-device",), "default_device", True),
        (("--use_fast_math", "-lineinfo"), "passthrough", ("--use_fast_math", "-lineinfo")),
    ],
)
def test_parse(options, field, expected):
    assert getattr(parse_options(options), field) == expected


def test_relative_include_is_made_absolute(tmp_path):
    assert parse_options(("-Iinc",), cwd=str(tmp_path)).include_dirs == (str(tmp_path / "inc"),)


@pytest.mark.parametrize(
    "options, needle",
    [
        (("-D",), "-D"),
        (("-D1X",), "1X"),
        (("-UX=1",), "X=1"),
        (("-std=c++99",), "c++99"),
        (("-arch=foo",), "foo"),
        (("-D N =1",), "N "),  # NVRTC refuses it too: invalid macro definition
        (("-DF(1)=2",), "F(1)"),  # and these: invalid macro definition
        (("-DF(a=2",), "F(a"),
        (("-DF(...,a)=2",), "F(...,a)"),
        (("-UF(a)",), "F(a)"),
        (("-dopt", ""), "'-dopt' has an empty value"),  # NVRTC 12.9 aborts the process on these
        (("-dopt=",), "'-dopt=' has an empty value"),
        (("-Xptxas=",), "'-Xptxas=' has an empty value"),
        (("--Ofast-compile=",), "'--Ofast-compile=' has an empty value"),
        (("stray",), "stray"),
        ((3,), "3"),
    ],
)
def test_malformed_option_names_it(options, needle):
    with pytest.raises(ValueError) as e:
        parse_options(options)
    assert needle in str(e.value)


@pytest.mark.parametrize(
    "arch, options, expected",
    [
        ("sm_90", (), "sm_90"),
        (90, (), "sm_90"),
        ("80", (), "sm_80"),
        (None, ("-arch=sm_75",), "sm_75"),
        ("sm_75", ("-arch=sm_75",), "sm_75"),
    ],
)
def test_arch(arch, options, expected):
    assert normalize_arch(arch, parse_options(options)) == expected


@pytest.mark.parametrize("arch, options", [(None, ()), ("sm_80", ("-arch=sm_90",)), ("gfx90a", ())])
def test_bad_arch(arch, options):
    with pytest.raises(ValueError):
        normalize_arch(arch, parse_options(options))


def test_key_fields_never_hold_paths(tmp_path):
    f = parse_options(("-I", str(tmp_path / "a"), "-isystem", str(tmp_path / "b"))).key_fields()
    assert not any(str(tmp_path) in v for _, v in f)
    assert ("include", "user0") in f and ("isystem", "isys0") in f


@pytest.mark.parametrize(
    "text",
    [
        "sm_90",
        "sm_90a",
        "sm_100f",
        "compute_90",
        "lto_90",
        "sm_5",
        "sm_",
        "sm_a",
        "sm_90ab",
        "sm_90A",
        "gfx_90",
        "sm90",
        "",
        "compute_",
        "sm_9_0",
        "sm_\u0669\u0660",
        "SM_90",
    ],
)
def test_is_arch_matches_the_pattern_it_replaced(text):
    import re

    expected = re.match(r"(sm|compute|lto)_[0-9]+[a-z]?\Z", text) is not None
    assert is_arch(text) == expected


def test_an_include_written_with_a_space_compiles_and_keys_as_without(tmp_path):
    """('-I <dir>',) as one string, which NVRTC reads as -I<dir>: the header is found there,
    and the key is that of -I<dir>."""
    from cupy_rawcode import compile as rc_compile
    from cupy_rawcode.key.request import cache_key

    (tmp_path / "scale.h").write_text("#define SCALE 3\n")
    src = '#include "scale.h"\nextern "C" __global__ void k(int* x) { x[0] = SCALE * N; }\n'
    spaced, glued = (f"-I {tmp_path}", "-D N=2"), (f"-I{tmp_path}", "-DN=2")
    assert rc_compile(src, options=spaced, arch="sm_90", cache_dir=tmp_path / "c").code
    assert cache_key(src, options=spaced, arch="sm_90") == cache_key(
        src, options=glued, arch="sm_90"
    )


# a value NVRTC accepts for each option that may take it as the next item (NEXT_VALUE)
NEXT_VALUES = {
    "rdc": "true", "relocatable-device-code": "true", "dopt": "on", "Ofc": "max",
    "Ofast-compile": "max", "maxrregcount": "32", "ftz": "true", "fmad": "false",
    "prec-sqrt": "false", "prec-div": "false", "jtd": "50", "jump-table-density": "50",
    "modify-stack-limit": "false", "device-stack-protector": "true",
    "builtin-move-forward": "true", "builtin-initializer-list": "true", "diag-error": "20",
    "diag-suppress": "550", "diag-warn": "20", "brief-diag": "true",
    "brief-diagnostics": "true", "split-compile": "0", "pch-verbose": "true",
    "pch-messages": "true", "instantiate-templates-in-pch": "true", "Xptxas": "-O2",
    "ptxas-options": "-O2",
}  # fmt: skip
# NVRTC's options that take a value but refuse it as the next item (a file, a standard)
JOINED_ONLY = [
    ("-std", "c++17"), ("--std", "c++17"), ("-time", "t.csv"), ("--time", "t.csv"),
    ("-pch-dir", "."), ("--pch-dir", "."), ("-create-pch", "x.pch"), ("-use-pch", "x.pch"),
    ("-opt-info", "inline"), ("--optimization-info", "inline"),
]  # fmt: skip


def _value(spelling: str) -> str:
    return NEXT_VALUES[spelling.lstrip("-")]


@pytest.mark.parametrize("spelling", sorted(NEXT_VALUE))
def test_a_value_given_as_the_next_item_is_joined_as_nvrtc_reads_it(spelling):
    """('-dopt', 'on') is handed on as '-dopt=on': one key for both spellings, the options
    around it untouched."""
    value = _value(spelling)
    apart = parse_options(("-lineinfo", spelling, value, "-DN=1"))
    joined = parse_options(("-lineinfo", f"{spelling}={value}", "-DN=1"))
    assert apart == joined
    assert apart.passthrough == ("-lineinfo", f"{spelling}={value}")


@pytest.mark.parametrize(
    "options, rdc",
    [
        (("-rdc", "true"), True),
        (("--relocatable-device-code", "true"), True),
        (("-rdc", "true", "-rdc", "false"), False),
        (("-rdc", "false"), False),
    ],
)
def test_rdc_spelled_apart_is_seen(options, rdc):
    assert wants_rdc(parse_options(options).passthrough) is rdc


def test_an_option_missing_its_value_at_the_end_is_named():
    with pytest.raises(ValueError, match="'-maxrregcount' needs a value"):
        parse_options(("-lineinfo", "-maxrregcount"))


def _nvrtc_accepts(options: tuple[str, ...]) -> bool:
    """Whether NVRTC itself takes ``options`` (an empty program: no GPU needed)."""
    return bare_nvrtc("", options).ok


@pytest.mark.parametrize("spelling", sorted(NEXT_VALUE))
def test_nvrtc_takes_the_next_item_as_the_value_of(spelling, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # -split-compile, -pch-*: nothing written outside
    assert _nvrtc_accepts((spelling, _value(spelling)))
    assert _nvrtc_accepts((f"{spelling}={_value(spelling)}",))


@pytest.mark.parametrize("spelling, value", JOINED_ONLY)
def test_nvrtc_refuses_the_value_apart_for(spelling, value, tmp_path, monkeypatch):
    """Not in NEXT_VALUE: NVRTC refuses these spelled apart (-std apart is read as -std=, a
    leniency of ours the README lists)."""
    monkeypatch.chdir(tmp_path)
    assert spelling not in NEXT_VALUE
    assert not _nvrtc_accepts((spelling, value))


def test_options_with_values_apart_compile_through_the_package(tmp_path):
    """A project's ('-dopt', 'on', '-maxrregcount', '32', '-rdc', 'true'): NVRTC and CuPy take
    it; so does the package, relocatable code included, with the key of the '=' spellings."""
    from cupy_rawcode import compile as rc_compile
    from cupy_rawcode.key.request import cache_key

    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    apart = ("-dopt", "on", "-maxrregcount", "32", "-rdc", "true")
    joined = ("-dopt=on", "-maxrregcount=32", "-rdc=true")
    result = rc_compile(src, options=apart, arch="sm_90", cache_dir=tmp_path / "c")
    assert result.code
    assert cache_key(src, options=apart, arch="sm_90") == cache_key(
        src, options=joined, arch="sm_90"
    )


# NVRTC trims every option of ASCII whitespace at both ends (ArrayFire writes " -D NAME=V")
PADDED = [
    (" -D TILE=32", "-DTILE=32"),
    ("\t-DTILE=32\n", "-DTILE=32"),
    ("  -std=c++14 ", "-std=c++14"),
    ("\r--use_fast_math\f", "--use_fast_math"),
    (" -I /tmp ", "-I/tmp"),
    ("\v-ftz=false", "-ftz=false"),
]


@pytest.mark.parametrize("padded, plain", PADDED)
def test_whitespace_around_an_option_is_read_as_nvrtc_reads_it(padded, plain, tmp_path):
    assert parse_options((padded, "-lineinfo")) == parse_options((plain, "-lineinfo"))
    source = 'static_assert(TILE == 32, "");\n' if "TILE" in plain else ""
    assert bare_nvrtc(source, (padded,)).ok and bare_nvrtc(source, (plain,)).ok


@pytest.mark.parametrize("item", ["", " ", "\t", " lineinfo"])
def test_an_item_blank_or_without_a_dash_is_refused_as_it_was_given(item):
    assert not bare_nvrtc("", (item,)).ok
    with pytest.raises(NotAnOptionError) as e:
        parse_options(("-lineinfo", item))
    assert e.value.item == item


# function-like -D macros, which NVRTC takes: each compiles through the package as bare NVRTC
FUNCTION_LIKE = [
    ("-DSQ(a)=((a)*(a))", 'static_assert(SQ(3) == 9, "");\n'),
    ("-DADD( a , b )=a+b", 'static_assert(ADD(1, 2) == 3, "");\n'),
    ("-DFIRST(a, ...)=a", 'static_assert(FIRST(4, 5, 6) == 4, "");\n'),
    ("-DF(x)", '#ifdef F\nstatic_assert(F(0) == 1, "");\n#else\n#error no F\n#endif\n'),
]


@pytest.mark.parametrize("option, source", FUNCTION_LIKE)
def test_a_function_like_macro_is_defined_as_nvrtc_defines_it(option, source, tmp_path):
    import cupy_rawcode

    assert bare_nvrtc(source, (option,)).ok
    cupy_rawcode.compile(source, arch="sm_90", target="ptx", options=(option,))


# every -arch of the options, folded as NVRTC folds them: the last number and kind, the suffix
# of any ('a' before 'f'); a fold NVRTC refuses (sm_80a) is refused there too
FOLDED = [
    ("sm_90a", "sm_90"),
    ("sm_90", "sm_90a"),
    ("compute_90a", "sm_90"),
    ("sm_90a", "compute_90"),
    ("sm_100f", "sm_100a"),
    ("sm_100a", "sm_100f"),
    ("sm_100f", "sm_100"),
    ("sm_90a", "sm_80", "sm_90"),
    ("sm_90a", "sm_80"),
    ("sm_80", "sm_90"),
    ("sm_90", "compute_90"),
    ("sm_90a", "compute_90"),
    ("sm_80", "compute_90"),
    ("compute_80", "compute_90"),
]
ARCH_MARK = (
    "#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL)\n"
    "__device__ int feature = 1;\n#endif\n__device__ int arch = __CUDA_ARCH__;\n"
)


@pytest.mark.parametrize("archs", FOLDED, ids="+".join)
def test_every_arch_option_folds_into_the_one_nvrtc_compiles_for(archs):
    options = tuple(f"-arch={a}" for a in archs)
    folded = parse_options(options).arch
    both = bare_nvrtc(ARCH_MARK, options[1:], arch=archs[0], kind="ptx")
    alone = bare_nvrtc(ARCH_MARK, (), arch=folded, kind="ptx")
    assert both.ok == alone.ok, (folded, both.log, alone.log)
    assert both.output == alone.output
    # the kind: a cubin, and for which machine (its ELF flags), or none (PTX only)
    cubins = [
        bare_nvrtc(ARCH_MARK, rest, arch=first, kind="cubin").output or b""
        for first, rest in ((archs[0], options[1:]), (folded, ()))
    ]
    assert [c[0x30:0x34] for c in cubins] == [cubins[0][0x30:0x34]] * 2, folded


# what NVRTC takes and refuses at the edges of -I, -isystem, -D, -U and -std: the parser agrees,
# with no directory where NVRTC searches none
EDGES = [
    (("-I",), True),
    (("-I=",), True),
    (("--include-path=",), True),
    (("-I ",), True),
    (("-I", ""), True),
    (("-isystem",), False),
    (("-isystem=",), False),
    (("-D\tX=1",), True),
    (("-D=\tX=1",), True),
    (("--define-macro= X=1",), True),
    (("-U\tX",), False),
]
EDGE_SOURCE = '#ifdef X\nstatic_assert(X == 1, "");\n#endif\n'


@pytest.mark.parametrize("options, taken", EDGES, ids=repr)
def test_options_at_the_edges_are_taken_or_refused_as_nvrtc_does(options, taken):
    assert bare_nvrtc(EDGE_SOURCE, options).ok is taken
    if not taken:
        with pytest.raises(ValueError):
            parse_options(options)
        return
    opts = parse_options(options)
    assert opts.include_dirs == () and opts.passthrough == ()
    import cupy_rawcode

    cupy_rawcode.compile(EDGE_SOURCE, arch="sm_90", target="ptx", options=options)
