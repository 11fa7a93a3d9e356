import pytest

from cupy_rawcode.headers.options import is_arch, normalize_arch, parse_options


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
        (("-I",), "-I"),
        (("-D",), "-D"),
        (("-D1X",), "1X"),
        (("-D=X",), "-D"),
        (("-UX=1",), "X=1"),
        (("-std=c++99",), "c++99"),
        (("-arch=foo",), "foo"),
        (("--include-path=",), "--include-path="),
        (("-I ",), "-I "),  # spaces only: no directory
        (("-D N =1",), "N "),  # NVRTC refuses it too: invalid macro definition
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
