import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, corpus

from cupy_rawcode.ground import digest_fields, encode_fields
from cupy_rawcode.key import key_fields
from cupy_rawcode.key.request import cache_key
from cupy_rawcode.toolkit.record import toolchain

SRC = corpus("block_reduce.cu")


@pytest.fixture(scope="module")
def cccl_copies(tmp_path_factory):
    """The CCCL in use (CuPy's is three dirs: merged) copied to two places: /a and /b."""
    srcs = [d.path for d in toolchain().system_dirs if d.tag == "cccl"]
    base = tmp_path_factory.mktemp("reloc")
    for name in ("a", "b"):
        for src in srcs:
            shutil.copytree(src, base / name / "cccl", dirs_exist_ok=True)
    return base


def test_relocated_roots_give_equal_keys(cccl_copies):
    ka = cache_key(SRC, arch="sm_90", header_sources=f"cccl={cccl_copies / 'a' / 'cccl'}")
    kb = cache_key(SRC, arch="sm_90", header_sources=f"cccl={cccl_copies / 'b' / 'cccl'}")
    assert ka == kb


def test_one_byte_in_a_deep_header_changes_the_key(cccl_copies, tmp_path):
    root = tmp_path / "c"
    shutil.copytree(cccl_copies / "a" / "cccl", root)
    hs = f"cccl={root}"
    before = cache_key(SRC, arch="sm_90", header_sources=hs)
    deep = root / "cub" / "util_type.cuh"
    data = deep.read_bytes()
    deep.write_bytes(data[:-2] + bytes([data[-2] ^ 1]) + data[-1:])
    assert cache_key(SRC, arch="sm_90", header_sources=hs) != before


def test_user_header_edit_changes_key(tree):
    root = tree({"i/u.h": "#define K 1\n"})
    opts = ("-I", str(root / "i"))
    k1 = cache_key('#include "u.h"\n', arch="sm_90", options=opts)
    (root / "i" / "u.h").write_text("#define K 2\n")
    assert cache_key('#include "u.h"\n', arch="sm_90", options=opts) != k1


BASE = dict(
    source='extern "C" __global__ void k() {}\n',
    arch="sm_90",
    options=(),
    name_expressions=(),
    target="cubin",
)

DIFFERS = {
    "source changes": dict(source='extern "C" __global__ void k2() {}\n'),
    "a macro is defined": dict(options=("-DX=1",)),
    "a macro value changes": dict(options=("-DX=2",)),
    "std changes": dict(options=("-std=c++20",)),
    "arch changes": dict(arch="sm_80"),
    "target changes": dict(target="ltoir"),
    "a name expression is added": dict(name_expressions=("k",)),
    "a passthrough option is added": dict(options=("--use_fast_math",)),
}
EQUAL = {
    "-I spelled three ways": [
        dict(options=("-I", "/x")),
        dict(options=("-I/x",)),
        dict(options=("--include-path=/x",)),
    ],
    "-D spelled two ways": [dict(options=("-DX=1",)), dict(options=("--define-macro=X=1",))],
    "name expressions reordered": [
        dict(name_expressions=("a", "b")),
        dict(name_expressions=("b", "a")),
    ],
    "default std spelled out": [dict(), dict(options=("-std=c++17",))],
    "include dir at another path": [dict(options=("-I/x",)), dict(options=("-I/y",))],
    "arch spelled as int": [dict(arch="sm_90"), dict(arch=90)],
}


def test_key_differs_when_an_earlier_archs_suffix_sticks():
    """-arch=sm_90a then -arch=sm_90 is sm_90a to NVRTC, never plain sm_90's entry."""
    plain = _key(arch=None, options=("-arch=sm_90",))
    assert _key(arch=None, options=("-arch=sm_90a", "-arch=sm_90")) != plain


def _key(**over):
    args = {**BASE, **over}
    return cache_key(args.pop("source"), **args)


@pytest.mark.parametrize("case", sorted(DIFFERS))
def test_key_differs_when(case):
    assert _key(**DIFFERS[case]) != _key()


@pytest.mark.parametrize("case", sorted(EQUAL))
def test_key_equal_when(case):
    keys = {_key(**v) for v in EQUAL[case]}
    assert len(keys) == 1


def test_nvrtc_version_is_a_key_field():
    common = dict(
        source="s",
        option_fields=[],
        search_tags=["cccl"],
        arch="sm_90",
        target="cubin",
        name_expressions=(),
        closure="c",
    )
    assert digest_fields(key_fields(nvrtc_version="12.9", **common)) != digest_fields(
        key_fields(nvrtc_version="13.0", **common)
    )


def test_fields_are_length_prefixed_not_concatenated():
    assert encode_fields([("a", "bc"), ("d", "")]) != encode_fields([("a", "b"), ("d", "c")])


_COUNT_SCANS = r"""
import sys, json
from cupy_rawcode.headers import scan, exact
from cupy_rawcode.key import request
calls = []
orig = scan.scan_file
scan.scan_file = lambda p: (calls.append(p), orig(p))[1]
src = open(sys.argv[1]).read()
print(json.dumps({"key": request.cache_key(src, arch="sm_90"), "scans": len(calls)}))
"""


def _run(path, env):
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_SCANS, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    return json.loads(out)


def test_new_process_keys_without_rescanning(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(SRC)
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "cache")}
    first, second = _run(src, env), _run(src, env)
    assert first["scans"] > 100
    assert second["scans"] == 0
    assert first["key"] == second["key"]


def test_manifest_sees_a_changed_header(tree, tmp_path):
    root = tree({"i/u.h": "#define K 1\n"})
    opts = ("-I", str(root / "i"))
    k1 = cache_key('#include "u.h"\n', arch="sm_90", options=opts)
    assert cache_key('#include "u.h"\n', arch="sm_90", options=opts) == k1  # manifest hit
    (root / "i" / "u.h").write_text("#define K 22\n")
    assert cache_key('#include "u.h"\n', arch="sm_90", options=opts) != k1


def test_corrupt_manifest_is_a_miss(tmp_path):
    k1 = cache_key(SRC, arch="sm_90")
    from cupy_rawcode.key import manifest

    manifest._memo.clear()
    for p in (tmp_path / "cache" / "manifests").rglob("*.json"):
        p.write_bytes(b'{"schema": "cupy-rawcode-manifest-1", "files": [[1, 2]]}')
    assert cache_key(SRC, arch="sm_90") == k1


@pytest.mark.parametrize(
    "stamps",
    [
        {"dirs": [["/nonexistent-dir", ["a.h"]]], "digest": "0" * 64},  # the directory is gone
        {"dirs": [["/", ["etc"]]]},  # no digest
        {"dirs": [["/", [5]]], "digest": "0" * 64},  # a number for a name
        {"dirs": [[7, ["etc"]]], "digest": "0" * 64},  # a number for a directory
        {"dirs": "not a list", "digest": "0" * 64},
        "not a record",
    ],
)
def test_damaged_manifest_stamps_are_a_miss_not_a_crash(tmp_path, stamps):
    from cupy_rawcode.key import manifest

    manifest._memo.clear()  # this process may know the manifest already: write it here
    k1 = cache_key(SRC, arch="sm_90")
    manifest._memo.clear()
    paths = list((tmp_path / "cache" / "manifests").rglob("*.json"))
    assert paths
    for p in paths:
        data = json.loads(p.read_text())
        data["stamps"] = stamps
        data["closure"] = "0" * 64  # were the damaged stamps believed, the key would change
        p.write_text(json.dumps(data))
    assert cache_key(SRC, arch="sm_90") == k1


# ---------------------------------------------------------------- a file and the same text

KERNEL = 'extern "C" __global__ void k(int* a) { a[0] = 1; }\n'
# name: (source, files in the source's directory, files in the -I directory, options)
FILE_VS_STRING_EQUAL = {
    "nothing included": (KERNEL, {}, {}, ()),
    "a system header": ("#include <cuda/std/cstdint>\n" + KERNEL, {}, {}, ()),
    "a quoted include found through -I": ('#include "u.h"\n' + KERNEL, {}, {"u.h": "//\n"}, ()),
    "a probe that finds nothing": (
        '#if __has_include("none.h")\n#include "none.h"\n#endif\n' + KERNEL,
        {},
        {},
        (),
    ),
    "a macro from a header that names no file": (
        "#include <m.h>\n" + KERNEL.replace("1;", "M(1);"),
        {},
        {"m.h": "#define M(x) (x + 1)\n"},
        (),
    ),
}
FILE_VS_STRING_DIFFER = {
    "a quoted include found in the source's directory": (
        '#include "u.h"\n' + KERNEL,
        {"u.h": "//\n"},
        {"u.h": "//\n"},
        (),
    ),
    "a probe that finds a file in the source's directory": (
        '#if __has_include("p.h")\n#include "p.h"\n#endif\n' + KERNEL,
        {"p.h": "//\n"},
        {},
        (),
    ),
    "assert in the source": (
        "#include <cassert>\n" + KERNEL.replace("a[0]", "assert(a); a[0]"),
        {},
        {},
        (),
    ),
    "__FILE__ in the source": (KERNEL.replace("1;", "__FILE__[0];"), {}, {}, ()),
    "a header's macro that expands __FILE__": (
        "#include <chk.h>\n" + KERNEL.replace("a[0]", "CHECK(a); a[0]"),
        {},
        {"chk.h": "#define WHERE __FILE__\n#define CHECK(x) \\\n  if (!(x)) printf(WHERE)\n"},
        (),
    ),
    "-lineinfo": (KERNEL, {}, {}, ("-lineinfo",)),
    "-G": (KERNEL, {}, {}, ("-G",)),
}


def _file_and_string_keys(tree, case: tuple) -> tuple[str, str]:
    source, in_source_dir, in_include_dir, options = case
    root = tree(
        {
            **{f"src/{k}": v for k, v in in_source_dir.items()},
            **{f"inc/{k}": v for k, v in in_include_dir.items()},
            "src/k.cu": source,
        }
    )
    opts = ("-I", str(root / "inc"), *options)
    as_file = cache_key(
        source, arch="sm_90", options=opts, source_dir=str(root / "src"), source_name="k.cu"
    )
    return as_file, cache_key(source, arch="sm_90", options=opts)


@pytest.mark.parametrize("case", sorted(FILE_VS_STRING_EQUAL))
def test_a_file_and_the_same_text_share_a_key_when(tree, case):
    as_file, as_string = _file_and_string_keys(tree, FILE_VS_STRING_EQUAL[case])
    assert as_file == as_string


@pytest.mark.parametrize("case", sorted(FILE_VS_STRING_DIFFER))
def test_a_file_and_the_same_text_have_different_keys_when(tree, case):
    as_file, as_string = _file_and_string_keys(tree, FILE_VS_STRING_DIFFER[case])
    assert as_file != as_string


def test_a_header_appearing_in_the_source_directory_changes_the_key(tree):
    """The quoted include looked in the source's directory first: the manifest stamps the file
    it did not find there as absent, so its arrival is seen without `cache clear`."""
    root = tree({"src/k.cu": '#include "u.h"\n' + KERNEL, "inc/u.h": "#define U 1\n"})
    args = dict(arch="sm_90", options=("-I", str(root / "inc")), source_dir=str(root / "src"))
    before = cache_key('#include "u.h"\n' + KERNEL, **args)
    assert cache_key('#include "u.h"\n' + KERNEL, **args) == before  # the manifest answers
    (root / "src" / "u.h").write_text("#define U 2\n")
    assert cache_key('#include "u.h"\n' + KERNEL, **args) != before


@pytest.mark.parametrize(
    "source, options, same_code",
    [
        (KERNEL, (), True),
        (KERNEL, ("-lineinfo",), False),
        ("#include <cassert>\n" + KERNEL.replace("a[0]", "assert(a); a[0]"), (), False),
    ],
)
def test_the_program_name_reaches_the_code_only_where_the_key_holds_it(
    tmp_path, source, options, same_code
):
    """What the rule rests on (NVRTC's own behaviour): compiled as a file and as a string, the
    code is the same exactly when the keys are."""
    from cupy_rawcode.key.request import make_request
    from cupy_rawcode.orchestrator.compiling import compile_request
    from cupy_rawcode.store import make_store

    (tmp_path / "k.cu").write_text(source)
    results = [
        compile_request(
            make_request(source, arch="sm_90", options=options, **where),
            store=make_store(tmp_path / name, redis_url="", bundles=()),
        )
        for name, where in [
            ("file", dict(source_dir=str(tmp_path), source_name="k.cu")),
            ("string", {}),
        ]
    ]
    assert (results[0].code == results[1].code) is same_code
    assert (results[0].key == results[1].key) is same_code


WARNS = 'extern "C" __global__ void k(int* a) { int unused; a[0] = 1; }\n'


def test_a_kernel_prebuilt_from_a_file_serves_the_same_text_as_a_string(tmp_path, monkeypatch):
    """`cupy-rawcode compile k.cu` fills the cache; RawKernel(open("k.cu").read()) hits it, and
    the warning replayed from the entry names the string's program, not the file."""
    import io

    from cupy_rawcode import cli
    from cupy_rawcode.kernel import RawKernel
    from cupy_rawcode.orchestrator import compiling as program

    f = tmp_path / "k.cu"
    f.write_text(WARNS)
    assert cli.main(["compile", str(f), "--arch", "sm_90"]) == 0
    monkeypatch.setattr(program, "_nvrtc_compile", lambda *a: pytest.fail("compiled again"))
    monkeypatch.setattr(program, "_speculate", lambda *a: None)
    log = io.StringIO()
    RawKernel(f.read_text(), "k").compile(log, arch="sm_90")
    assert "declared but never referenced" in log.getvalue()
    assert str(f) not in log.getvalue() and "<source>/kernel-" in log.getvalue()
