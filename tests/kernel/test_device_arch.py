"""The arch a drop-in kernel compiles for on a device, as CuPy chooses it: CuPy appends the
device's -arch after the kernel's options, and NVRTC keeps the last one (measured: NVRTC 12.9
and 13.0), so an -arch among the options never makes code the device cannot load."""

from __future__ import annotations

import io
import struct

import pytest

import cupy_rawcode
from cupy_rawcode.ground.errors import RawcodeValueError
from cupy_rawcode.headers.options import merged_arch

SRC = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'


def _made(code: bytes) -> str:
    """'cubin sm_90', 'cubin sm_90a' or 'ptx sm_90' for compiled code."""
    if code[:4] == b"\x7fELF":
        flags = struct.unpack_from("<I", code, 0x30)[0]
        if code[7] == 0x41:  # CUDA's newer ELF ABI (sm_100 and up; every arch from CUDA 13),
            # whose flags need not mark an sm_90a cubin of code that uses nothing of sm_90a's
            return f"cubin sm_{flags >> 8 & 0xFF}{'a' if flags & 0x8 else ''}"
        return f"cubin sm_{flags & 0xFF}{'a' if flags & 0x800 else ''}"
    target = next(x for x in code.decode().splitlines() if x.startswith(".target"))
    return f"ptx {target.split()[1]}"


@pytest.mark.parametrize(
    "given, appended, nvrtc",
    [
        ("sm_80", "sm_90", "sm_90"),
        ("compute_80", "sm_90", "sm_90"),
        ("sm_90a", "sm_90", "sm_90a"),  # an arch-specific suffix of either stays
        ("sm_90a", "sm_100", "sm_100a"),
        ("sm_100f", "sm_100", "sm_100f"),
        ("sm_90a", "compute_90", "sm_90a"),  # a real kind, once given, stays
        ("sm_80", "compute_90", "sm_90"),
        ("compute_80", "compute_90", "compute_90"),
    ],
)
def test_merged_arch_is_what_nvrtc_makes_of_two(given, appended, nvrtc):
    from conftest import bare_nvrtc

    assert merged_arch(given, appended) == nvrtc
    both = bare_nvrtc("", (f"-arch={appended}",), arch=given, kind="cubin").output or b""
    alone = bare_nvrtc("", (), arch=nvrtc, kind="cubin").output or b""
    assert both[0x30:0x34] == alone[0x30:0x34]  # the same machine's cubin, or none for both


@pytest.mark.parametrize(
    "env, options, made, warned",
    [
        ({}, (), "cubin sm_90", False),
        ({}, ("-arch=sm_80",), "cubin sm_90", True),  # CuPy's sm_90 comes last: NVRTC keeps it
        ({}, ("--gpu-architecture", "sm_80"), "cubin sm_90", True),
        ({}, ("-arch=compute_80",), "cubin sm_90", True),
        ({}, ("-arch=sm_90a",), "cubin sm_90a", False),  # NVRTC merges the two: sm_90a
        ({"CUPY_COMPILE_WITH_PTX": "1"}, (), "ptx sm_90", False),
        ({"CUPY_COMPILE_WITH_PTX": "1"}, ("-arch=sm_80",), "ptx sm_90", True),
        ({"CUPY_COMPILE_WITH_PTX": "true"}, (), "cubin sm_90", False),  # CuPy reads an integer
        ({"CUPY_RAWCODE_CUPY_OPTIONS": "0"}, ("-arch=sm_80",), "cubin sm_80", False),  # as given
    ],
)
def test_a_device_compile_is_for_the_device_as_in_cupy(monkeypatch, env, options, made, warned):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    log = io.StringIO()
    k = cupy_rawcode.RawKernel(SRC, "k", options)
    code = k._build.device_code(90, log)
    elf = _made(bytes(code.data))
    assert elf == made or (elf + "a" == made and code.data[7] == 0x41)
    assert f"{code.kind} {code.arch}".replace("compute_", "sm_") == made  # what was asked of NVRTC
    assert ('"--gpu-architecture(-arch)=80" followed by' in log.getvalue()) == warned


def test_an_explicit_arch_that_contradicts_the_options_is_still_refused():
    """compile(arch=) is no device's choice: an -arch saying otherwise is a mistake, named."""
    with pytest.raises(RawcodeValueError, match="conflicts with the option -arch=sm_80"):
        cupy_rawcode.compile(SRC, arch="sm_90", options=("-arch=sm_80",))
    with pytest.raises(RawcodeValueError, match="conflicts"):
        cupy_rawcode.RawKernel(SRC, "k", ("-arch=sm_80",)).compile(arch="sm_90")


def test_an_explicit_arch_is_refused_after_a_launch_too():
    """compile(arch=) against the options' -arch is refused whatever was compiled before (a
    launch compiled sm_90 for the device: the same arch asked explicitly was then taken)."""
    k = cupy_rawcode.RawKernel(SRC, "k", ("-arch=sm_80",))
    k._build.device_code(90)
    with pytest.raises(RawcodeValueError, match="conflicts with the option -arch=sm_80"):
        k.compile(arch="sm_90")


def test_a_device_compile_is_kept_under_the_arch_nvrtc_made():
    """-arch=sm_90a on an sm_90 device: the code is sm_90a's, kept and named so in a cold
    process as in a warm one (it was 'sm_90' cold)."""
    k = cupy_rawcode.RawKernel(SRC, "k", ("-arch=sm_90a",))
    k._build.device_code(90)
    assert list(k._build.compiled) == ["sm_90a"] and k._build.device_arch == {90: "sm_90a"}


def test_warmup_for_an_arch_compiles_what_a_launch_on_it_looks_up(monkeypatch):
    """warmup(arch='sm_90') of a -arch=sm_80 kernel compiles it as for an sm_90 device (it was
    refused as a conflict), under the key a launch there looks up."""
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    src = SRC.replace("1.0f", "2.0f")
    summary = cupy_rawcode.warmup(
        cupy_rawcode.RawKernel(src, "k", ("-arch=sm_80",)), arch="sm_90", workers=1
    )
    assert summary.ok and len(summary.compiled) == 1
    code = cupy_rawcode.RawKernel(src, "k", ("-arch=sm_80",))._build.device_code(90)
    assert _made(bytes(code.data)) == "cubin sm_90" and code.key == summary.compiled[0].key
