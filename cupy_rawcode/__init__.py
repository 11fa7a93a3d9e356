"""cupy-rawcode: compile raw CUDA C++ kernels with CCCL and std headers for CuPy, without Jitify.

Importing this package is cheap: cupy, cuda.core and pcpp load only when first needed.
"""

from __future__ import annotations

from .ground import VERSION as __version__

# name -> "module:attribute" (strings, not pairs: fewer objects made on every import)
_EXPORTS = {
    "resolve": "headers.resolver:resolve",
    "Closure": "headers.closure:Closure",
    "Header": "headers.closure:Header",
    "ResolveError": "headers.closure:ResolveError",
    "BadInputError": "ground.errors:BadInputError",
    "RawcodeError": "ground.errors:RawcodeError",
    "RawcodeWarning": "ground.errors:RawcodeWarning",
    "ConfigError": "ground.errors:ConfigError",
    "MissingHeaderError": "headers.closure:MissingHeaderError",
    "cache_key": "key.request:cache_key",
    "parse_options": "headers.options:parse_options",
    "toolchain": "toolkit.record:toolchain",
    "compile": "orchestrator.flow:compile",
    "CompileError": "compiler.nvrtc:CompileError",
    "RawKernel": "kernel:RawKernel",
    "RawModule": "kernel:RawModule",
    "SignatureWarning": "ground.errors:SignatureWarning",
    "StandardRaisedWarning": "headers.standard:StandardRaisedWarning",
    "HeaderChangedWarning": "orchestrator.compiling:HeaderChangedWarning",
    "UnresolvedIncludeWarning": "orchestrator.compiling:UnresolvedIncludeWarning",
    "DroppedIncludeWarning": "orchestrator.jitify:DroppedIncludeWarning",
    "RecordWarning": "hook.recording:RecordWarning",
    "Signature": "launch.signature:Signature",
    "install": "hook.install:install",
    "set_store": "store:set_store",
    "make_store": "store:make_store",
    "uninstall": "hook.install:uninstall",
    "record": "hook.install:record",
    "warmup": "parallel.precompile:warmup",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    try:
        module, _, attr = _EXPORTS[name].partition(":")
    except KeyError:
        raise AttributeError(f"module 'cupy_rawcode' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value
