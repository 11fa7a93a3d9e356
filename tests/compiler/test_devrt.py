"""Relocatable device code (devrt.py): the option table, the libcudadevrt.a search over temporary
directories, and real NVRTC + nvJitLink links (CPU: neither needs a GPU)."""

import os
import struct

import pytest
from conftest import bare_nvrtc

from cupy_rawcode.compiler import devrt, strip
from cupy_rawcode.compiler.devrt import LinkError, link, search
from cupy_rawcode.ground import config
from cupy_rawcode.headers.options import wants_rdc
from cupy_rawcode.key import LINK_RULES
from cupy_rawcode.key.request import link_field
from cupy_rawcode.toolkit.discovery import nvrtc_version

PARENT = r"""
extern "C" __global__ void child(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
extern "C" __global__ void parent(float* x, int n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) child<<<(n + 31) / 32, 32>>>(x, n);
}
"""
NO_RUNTIME = (
    "device-side kernel launch could not be processed as the required runtime APIs are not declared"
)
LAUNCH = ("__cudaCDP2LaunchDeviceV2", "__cudaCDP2GetParameterBufferV2")


@pytest.mark.parametrize(
    "options, rdc",
    [
        ((), False),
        (("-dc",), True),
        (("--device-c",), True),
        (("-rdc=true",), True),
        (("--relocatable-device-code=true",), True),
        (("-rdc=false",), False),
        (("--relocatable-device-code=false",), False),
        (("-rdc=false", "-rdc=true"), True),  # NVRTC: the last -rdc= wins
        (("-rdc=true", "-rdc=false"), False),
        (("-use_fast_math", "-dc", "-lineinfo"), True),
        (("-dw",), False),  # --device-w: whole-program code
        (("-ewp",), False),  # extensible whole program is not linked here
        (("-dlto",), False),
        (("-rdc",), False),
        (("-dcx",), False),  # no value / not the flag
    ],
)
def test_wants_rdc_and_the_key_field(options, rdc):
    assert wants_rdc(options) is rdc
    assert link_field(options) == ("link", LINK_RULES if rdc else "")


# --- finding libcudadevrt.a -------------------------------------------------------------------


def _lib(d) -> str:
    d.mkdir(parents=True, exist_ok=True)
    (d / devrt.LIBRARY).write_bytes(b"!<arch>\n")
    return str(d / devrt.LIBRARY)


@pytest.mark.parametrize(
    "layout, expected",
    [
        ({"a": False, "b": True, "c": True}, "b"),  # the first directory holding it wins
        ({"a": True, "b": True}, "a"),
        ({"a": False, "b": False}, None),  # nowhere
        ({}, None),
    ],
)
def test_search_takes_the_first_directory_in_order(tmp_path, layout, expected):
    dirs = []
    for name, has in layout.items():
        d = tmp_path / name
        d.mkdir()
        if has:
            _lib(d)
        dirs.append(str(d))
    dirs.insert(1, str(tmp_path / "does-not-exist"))
    found = search(dirs)
    assert found == (str(tmp_path / expected / devrt.LIBRARY) if expected else None)


def test_search_skips_a_directory_named_like_the_library(tmp_path):
    (tmp_path / "a" / devrt.LIBRARY).mkdir(parents=True)
    assert search([str(tmp_path / "a"), str(tmp_path / "b")]) is None
    assert search([str(tmp_path / "a"), os.path.dirname(_lib(tmp_path / "b"))]) == str(
        tmp_path / "b" / devrt.LIBRARY
    )


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """Fake wheel, toolkit and CuPy locations; cuda.pathfinder answers nothing."""
    site, toolkit, cupy_root = (
        tmp_path / "site-packages",
        tmp_path / "toolkit",
        tmp_path / "cupy-cuda",
    )
    (toolkit / "include").mkdir(parents=True)
    monkeypatch.setattr(devrt, "_pathfinder_dirs", lambda: [])
    monkeypatch.setattr(config, "site_dirs", lambda: [str(site)])
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(
        devrt, "_cupy_dirs", lambda: [str(cupy_root / "lib64"), str(cupy_root / "lib")]
    )
    return site, toolkit, cupy_root


def test_candidate_order_is_wheels_then_toolkit_then_cupy(sources):
    site, toolkit, cupy_root = sources
    assert list(devrt.candidate_dirs()) == [
        str(site / "nvidia/cu13/lib"),
        str(site / "nvidia/cuda_runtime/lib"),
        str(toolkit / "lib64"),
        str(toolkit / "lib"),
        str(cupy_root / "lib64"),
        str(cupy_root / "lib"),
    ]


@pytest.mark.parametrize(
    "present, winner",
    [
        (("cupy/lib",), "cupy/lib"),
        (("cupy/lib64", "toolkit/lib"), "toolkit/lib"),
        (("toolkit/lib", "toolkit/lib64"), "toolkit/lib64"),
        (("toolkit/lib64", "wheel12"), "wheel12"),
        (("wheel12", "wheel13"), "wheel13"),
        ((), None),
    ],
)
def test_find_cudadevrt_follows_the_order(sources, present, winner):
    site, toolkit, cupy_root = sources
    where = {
        "wheel13": site / "nvidia/cu13/lib",
        "wheel12": site / "nvidia/cuda_runtime/lib",
        "toolkit/lib64": toolkit / "lib64",
        "toolkit/lib": toolkit / "lib",
        "cupy/lib64": cupy_root / "lib64",
        "cupy/lib": cupy_root / "lib",
    }
    for name in present:
        _lib(where[name])
    found = devrt.find_cudadevrt()
    assert found == (str(where[winner] / devrt.LIBRARY) if winner else None)


def test_pathfinder_answer_comes_first(sources, tmp_path, monkeypatch):
    site, toolkit, _ = sources
    _lib(toolkit / "lib64")
    elsewhere = _lib(tmp_path / "env" / "lib")
    monkeypatch.setattr(devrt, "_pathfinder_dirs", lambda: [os.path.dirname(elsewhere)])
    assert devrt.find_cudadevrt() == elsewhere


def test_this_machine_has_one():
    """The cu12 extra installs nvidia-cuda-runtime-cu12, which holds libcudadevrt.a."""
    found = devrt.find_cudadevrt()
    assert found is not None and os.path.getsize(found) > 100_000


# --- real compiles and links ------------------------------------------------------------------


def nvrtc_compile(source: str, kind: str, options: tuple[str, ...], arch: str = "sm_90") -> bytes:
    """NVRTC's output of one kind, straight from cuda.bindings (no driver needed for any kind)."""
    done = bare_nvrtc(source, options, arch, kind)
    if not done.ok:
        raise RuntimeError(done.log)
    return done.output.rstrip(bytes(1)) if kind == "ptx" else done.output


def elf_functions(cubin: bytes) -> dict[str, bool]:
    """{name: defined} of an ELF's function symbols (STT_FUNC)."""
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]
    out = {}
    for sh_type, link_, off, size, entsize in ((s[1], s[6], s[4], s[5], s[9]) for s in sections):
        if sh_type != 2 or not entsize:  # SHT_SYMTAB
            continue
        strtab = sections[link_][4]
        for j in range(size // entsize):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", cubin, off + j * entsize)
            if st_info & 0xF == 2:
                end = cubin.index(b"\0", strtab + st_name)
                name = cubin[strtab + st_name : end].decode("latin-1")
                out[name] = out.get(name, False) or st_shndx != 0
    return out


def elf_type(cubin: bytes) -> int:
    return struct.unpack_from("<H", cubin, 16)[0]  # 1: relocatable, 2: executable


NVRTC = nvrtc_version()


def test_without_rdc_nvrtc_refuses_the_device_side_launch():
    with pytest.raises(RuntimeError, match=NO_RUNTIME):
        nvrtc_compile(PARENT, "cubin", ())


@pytest.mark.parametrize(
    "kind, options",
    [
        ("cubin", ("-dc",)),
        ("cubin", ("-rdc=true",)),
        ("ptx", ("-dc",)),
        ("ltoir", ("-dc", "-dlto")),
    ],
)
def test_link_gives_a_loadable_cubin_with_both_kernels(kind, options):
    arch = "compute_90" if kind == "ptx" else "sm_90"
    code = nvrtc_compile(PARENT, kind, options, arch)
    if kind == "cubin":  # NVRTC's -dc cubin is relocatable and calls into the device runtime
        assert elf_type(code) == 1
        functions = elf_functions(code)
        assert all(functions.get(name) is False for name in LAUNCH)
    cubin = link(code, kind, "sm_90", NVRTC)
    assert cubin[:4] == b"\x7fELF" and elf_type(cubin) == 2
    functions = elf_functions(cubin)
    assert functions.get("parent") and functions.get("child")
    assert all(functions.get(name) for name in LAUNCH)  # resolved from libcudadevrt.a


def test_a_link_failure_carries_nvjitlinks_log():
    source = "extern __device__ float helper(float);\n" + PARENT.replace(
        "x[i] *= 2.0f", "x[i] = helper(x[i])"
    )
    code = nvrtc_compile(source, "cubin", ("-dc",))
    with pytest.raises(LinkError) as e:
        link(code, "cubin", "sm_90", NVRTC)
    message = str(e.value)
    assert "Undefined reference to '_Z6helperf'" in message
    assert devrt.LIBRARY in message and "sm_90" in message


@pytest.mark.parametrize(
    "kind, arch, code, words",
    [
        ("cubin", "compute_90", b"\x7fELF", ["arch=compute_90 is virtual"]),
        ("cubin", "sm_90", b"", ["produced no cubin", "ltoir"]),
    ],
)
def test_link_refuses_what_cannot_be_linked(kind, arch, code, words):
    with pytest.raises(LinkError) as e:
        link(code, kind, arch, NVRTC)
    assert all(w in str(e.value) for w in words)


def test_link_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind='fatbin'"):
        link(b"\x7fELF", "fatbin", "sm_90", NVRTC)


@pytest.fixture(scope="module")
def relocatable() -> bytes:
    return nvrtc_compile(PARENT, "cubin", ("-dc",))


def test_no_cudadevrt_says_what_to_install(relocatable, monkeypatch):
    monkeypatch.setattr(devrt, "candidate_dirs", lambda: iter(()))
    with pytest.raises(LinkError) as e:
        link(relocatable, "cubin", "sm_90", NVRTC)
    message = str(e.value)
    major = NVRTC[0]
    suffix = f"-cu{major}" if major <= 12 else ""
    assert f"{devrt.LIBRARY} (the device runtime) is in no CUDA wheel" in message
    assert f"cupy-rawcode[cu{major}]" in message
    assert f"nvidia-cuda-runtime{suffix}=={major}.*" in message
    assert "CUDA_HOME" in message
    assert "nvidia-nvjitlink" not in message  # nvJitLink is fine here


@pytest.mark.parametrize("other", [(NVRTC[0], NVRTC[1] + 1), (NVRTC[0] + 1, 0)])
def test_nvjitlink_of_another_release_is_refused(relocatable, other):
    with pytest.raises(LinkError) as e:
        link(relocatable, "cubin", "sm_90", other)
    message = str(e.value)
    have = "%d.%d" % strip.nvjitlink.version
    assert f"nvJitLink is {have}, not NVRTC's {other[0]}.{other[1]}" in message
    assert (
        f"nvjitlink{'-cu%d' % other[0] if other[0] <= 12 else ''}=={other[0]}.{other[1]}.*"
        in message
    )
    assert "device runtime" not in message  # libcudadevrt.a was found


def test_no_nvjitlink_and_no_cudadevrt_name_both(relocatable, monkeypatch):
    monkeypatch.setattr(devrt, "candidate_dirs", lambda: iter(()))
    monkeypatch.setattr(strip.nvjitlink, "get", lambda: None)
    with pytest.raises(LinkError) as e:
        link(relocatable, "cubin", "sm_90", (13, 0))
    message = str(e.value)
    assert "nvJitLink is not available" in message and "(the device runtime)" in message
    assert "'nvidia-nvjitlink==13.0.*' 'nvidia-cuda-runtime==13.*'" in message
    assert "cupy-rawcode[cu13]" in message


@pytest.mark.parametrize("options", [("-dlto",), ("--dlink-time-opt",), ("-rdc=false", "-dlto")])
@pytest.mark.parametrize("target, arch", [("cubin", "sm_90"), ("ptx", "compute_90")])
def test_lto_without_rdc_is_refused_naming_the_option(options, target, arch):
    """NVRTC gives no cubin or PTX with -dlto alone (CuPy then fails to load an empty image):
    named before NVRTC runs."""
    from cupy_rawcode import compile as rc_compile

    with pytest.raises(ValueError, match=rf"-dlto \(--dlink-time-opt\).*no {target}.*-dc or -rdc"):
        rc_compile(PARENT, options=options, arch=arch, target=target)


@pytest.mark.parametrize(
    "options", [("-dc", "-dlto"), ("-dc", "--dlink-time-opt"), ("-rdc", "true", "-dlto")]
)
def test_lto_with_rdc_compiles_through_the_package(options, tmp_path):
    from cupy_rawcode import compile as rc_compile

    code = rc_compile(PARENT, options=options, arch="sm_90", cache_dir=tmp_path / "c").code
    assert code[:4] == b"\x7fELF" and elf_type(code) == 2
    assert {"parent", "child"} <= set(elf_functions(code))
