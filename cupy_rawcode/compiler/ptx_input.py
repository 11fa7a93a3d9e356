"""PTX given as the source (text starting with ``.version``): linked to a cubin by cuda.core
(nvJitLink, or the driver's linker), not compiled. Of the options, those that steer the PTX
assembler apply (a register bound, debug information, line info, ptxas's own options, device
code optimization); the C++ compiler's (macros, includes, the standard, math flags) have
nothing to act on in PTX."""

from __future__ import annotations

from ..ground import errors
from ..ground.cudaimport import cuda_module

_REGISTERS = ("-maxrregcount", "--maxrregcount")
_DEBUG = ("-G", "--device-debug")
_LINE_INFO = ("-lineinfo", "--generate-line-info")
_PTXAS = ("-Xptxas", "--ptxas-options")
_OPTIMIZE = ("-dopt", "--dopt")


def link_options(passthrough: tuple[str, ...]) -> dict:
    """cuda.core ProgramOptions fields for the assembler options among ``passthrough`` (as
    parse_options hands them on: a value joined by '='); RawcodeValueError for a register
    bound that is no number."""
    found: dict = {}
    ptxas: list[str] = []
    for option in passthrough:
        name, _, value = option.partition("=")
        if name in _REGISTERS:
            if not value.isdigit():
                raise errors.RawcodeValueError(f"option {option!r}: expected a register count")
            found["max_register_count"] = int(value)
        elif name in _DEBUG:
            found["debug"] = True
        elif name in _LINE_INFO:
            found["lineinfo"] = True
        elif name in _PTXAS:
            ptxas.append(value)
        elif name in _OPTIMIZE:
            found["device_code_optimize"] = value == "on"
    if ptxas:
        found["ptxas_options"] = ptxas
    return found


def link(req) -> bytes:
    """``req.source`` (PTX) linked to ``req.target`` for ``req.arch``, with the assembler
    options of ``req.options``, on the calling thread (signals.guarded runs it)."""
    core = cuda_module("cuda.core")
    options = core.ProgramOptions(arch=req.arch, **link_options(req.options.passthrough))
    return bytes(core.Program(req.source, "ptx", options).compile(req.target).code)
