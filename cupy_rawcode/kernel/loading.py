"""Loading a drop-in's module: once per device, under its build's lock, so threads racing on a
first launch share one load."""

from __future__ import annotations  # unevaluated: less work on a warm hit

from .building import Code, _Build, _compute_capability


def device_module(build: _Build, log_stream=None):
    """The CuPy Module for the current device, compiled and loaded on first use."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    mod = build.modules.get(dev)
    if mod is not None:
        return mod
    with build.lock:
        mod = build.modules.get(dev)
        if mod is None:
            if build.is_file:
                assert build.path is not None  # is_file: the path of a cubin/ptx/fatbin
                mod = _load_file(build.path)
            else:
                mod = _load_module(build.device_code(_compute_capability(), log_stream))
            build.modules[dev] = mod
        return mod


def _load_module(code: Code):
    """Load compiled bytes into a CuPy Module on the current device (cubin and PTX alike)."""
    return load_bytes(code.data, code.symbols)


def load_bytes(data: bytes, mapping: dict | None = None, module=None):
    """The one module loader (the classes' and install()'s CuPy compiles): ``data`` loaded into
    a new ``module`` (default: CuPy's Module), with ``mapping`` (name expression -> mangled
    name) set when there is one."""
    if module is None:
        from cupy.cuda.function import Module  # CuPy: imported when a module loads

        module = Module
    mod = module()
    mod.load(data)
    if mapping:
        mod._set_mapping(dict(mapping))
    return mod


def _load_file(path: str):
    """Load a cubin, PTX or fatbin file into a CuPy Module on the current device."""
    from cupy.cuda.function import Module  # CuPy: imported when a module loads

    mod = Module()
    mod.load_file(path)
    return mod
