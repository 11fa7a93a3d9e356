"""CuPy drop-ins: RawKernel and RawModule with CuPy 14's call convention, built by cupy-rawcode.

The classes are defined here, in the package itself (a warm hit loads one module fewer);
building.py checks their inputs at construction, builds their code for a device (warm index,
key, store, compile, background warmups, recording) and loads it once per device;
cucomplex.py translates cuComplex, pickling.py says what a pickle carries. Constructing never
compiles or touches the GPU: the first launch compiles once per architecture and loads the
module once per device.
"""

from __future__ import annotations  # unevaluated: less work on a warm hit

import os
import threading
import warnings

from ..ground import deferred
from .building import (
    Code,
    _arch_target,
    _Build,
    _check_backend,
    _check_code,
    _check_name,
    _check_options,
    _compute_capability,
    _cupy_for_nvcc,
    build,
    device_module,
    options_module,
)

cupy = deferred("cupy")
errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised
binding = deferred("cupy_rawcode.launch.bind")  # a launch() with arguments: its first
signatures = deferred("cupy_rawcode.launch.signature")
strip = deferred("cupy_rawcode.compiler.strip")  # entry functions: compile() only
inputs = deferred("cupy_rawcode.ground.inputs")
pickling = deferred("cupy_rawcode.kernel.pickling")  # off the hit path: pickling only

__all__ = ["Code", "RawKernel", "RawModule", "build"]


_UNPARSED = object()

# the kernel attributes CuPy reports (cuFuncGetAttribute), two of them settable: properties of
# RawKernel, here rather than in a module of their own (one module fewer on a warm hit's imports)
_ATTRIBUTES = (
    "max_threads_per_block",
    "shared_size_bytes",
    "const_size_bytes",
    "local_size_bytes",
    "num_regs",
    "ptx_version",
    "binary_version",
    "cache_mode_ca",
    "max_dynamic_shared_size_bytes",
    "preferred_shared_memory_carveout",
)


def _driver_attr(name: str) -> tuple:
    """(CuPy's driver module, the CU_FUNC_ATTRIBUTE_ constant of ``name``)."""
    from cupy_backends.cuda.api import driver

    return driver, getattr(driver, "CU_FUNC_ATTRIBUTE_" + name.upper())


def _get_attr(name: str):
    """The getter of the attribute ``name``, on the kernel of the current device."""

    def get(self) -> int:
        driver, attr = _driver_attr(name)
        return driver.funcGetAttribute(attr, self.kernel.ptr)

    get.__doc__ = f"The kernel's {name} on the current device (cuFuncGetAttribute)."
    return get


def _set_attr(name: str):
    """The setter of the attribute ``name`` (cuFuncSetAttribute)."""

    def set_(self, value: int) -> None:
        driver, attr = _driver_attr(name)
        driver.funcSetAttribute(self.kernel.ptr, attr, value)

    return set_


# what a RawKernel and a RawModule read from their build, as CuPy's classes have it: one set of
# properties shared by both classes (a base class of its own cost a warm hit's imports more)
_FROM_BUILD = (
    property(lambda self: self._build.code, doc="The CUDA source (None for a file)."),
    property(lambda self: self._build.options, doc="The options as given."),
    property(lambda self: self._build.path, doc="The file compiled or loaded (None for code)."),
    property(lambda self: self._build.name_expressions, doc="The name expressions given."),
    property(lambda self: self._build.translate, doc="Whether cuComplex is translated."),
)


class RawKernel:
    """``cupy.RawKernel`` with cupy-rawcode's header resolution, shim headers and cache.

    ``k(grid, block, args, *, shared_mem=0, stream=None)`` launches exactly as CuPy does.
    ``jitify=True`` compiles as Jitify did (errors are also JitifyException, an include in a
    header that matches no file is dropped with a warning); ``backend='nvcc'`` returns CuPy's
    own ``cupy.RawKernel``."""

    code, options, file_path, name_expressions, translate_cucomplex = _FROM_BUILD

    def __new__(cls, *args, **kwargs):
        return _cupy_for_nvcc("RawKernel", args, kwargs, 3) or super().__new__(cls)

    def __init__(
        self,
        code: str,
        name: str,
        options: tuple = (),
        backend: str = "nvrtc",
        *,
        translate_cucomplex: bool = False,
        enable_cooperative_groups: bool = False,
        jitify: bool | None = None,
    ):
        if not isinstance(code, str):
            raise errors.RawcodeTypeError(f"code must be str, not {type(code).__name__}")
        if not isinstance(name, str):
            raise errors.RawcodeTypeError(f"name must be str, not {type(name).__name__}")
        _check_code(code)
        _check_name(name)
        _check_backend(backend)
        options = _check_options(options)  # a malformed option fails here, not at first launch
        self._init(
            _Build(code, None, options, bool(translate_cucomplex), None, jitify=bool(jitify)),
            name,
            bool(enable_cooperative_groups),
            backend,
            jitify,
        )

    def _init(
        self, build: _Build, name: str, cooperative: bool, backend: str = "nvrtc", jitify=None
    ) -> None:
        self._build, self.name, self.__name__ = build, name, name
        self.enable_cooperative_groups, self.backend, self.jitify = cooperative, backend, jitify
        self._functions: dict[int, object] = {}
        self._lock = threading.Lock()
        self._entry = name  # the name or name expression the signature is looked up by
        self._signature: object = _UNPARSED
        self.check_pointers = True

    @classmethod
    def _from_build(cls, build: _Build, name: str, cooperative: bool) -> RawKernel:
        k = cls.__new__(cls)
        k._init(build, name, cooperative, jitify=True if build.jitify else None)
        return k

    def __call__(self, grid, block, args, **kwargs) -> None:
        """Launch: ``k(grid, block, args, *, shared_mem=0, stream=None)`` (CuPy's convention)."""
        self.kernel(
            grid, block, args, enable_cooperative_groups=self.enable_cooperative_groups, **kwargs
        )

    def launch(self, grid, block, *args, shared_mem: int = 0, stream=None, **kwargs) -> None:
        """Typed launch: binds positional and keyword arguments to the parsed signature, fills
        defaults, converts scalars to the declared types and checks arrays against pointer
        parameters (``check_pointers``). Without a parsed signature, positional arguments pass
        unconverted, as with ``k(grid, block, args)``."""
        sig = self.signature
        if sig is None:
            if kwargs:
                raise errors.RawcodeTypeError(
                    f"{self._entry}: keyword arguments need a parsed signature, and "
                    f"this kernel's could not be parsed ({self._signature_error})"
                )
            values = args
        else:
            values = binding.bind(sig, args, kwargs, check_pointers=self.check_pointers)
        self(grid, block, values, shared_mem=shared_mem, stream=stream)

    @property
    def signature(self):
        """The parsed parameters (a ``cupy_rawcode.launch.signature.Signature``), or None with a
        warning when the declaration cannot be parsed safely (launch is then positional)."""
        if self._signature is _UNPARSED:
            self._signature = self._parse_signature()
        return self._signature

    def _parse_signature(self):
        self._signature_error = None
        try:
            if self._build.is_file:
                raise signatures.SignatureError(
                    f"{self._build.path} is compiled code, with no source"
                )
            source, where = self._build.source()
            opts = options_module.parse_options(self._build.options)
            return binding.signature_for(source, self._entry, opts, where)
        except (signatures.SignatureError, OSError, UnicodeDecodeError) as e:
            self._signature_error = str(e)
            warnings.warn(
                f"cupy_rawcode: cannot parse the parameters of {self._entry!r} ({e}); "
                "launch() takes positional arguments only and converts nothing",
                errors.SignatureWarning,
                stacklevel=3,
            )
            return None

    @property
    def kernel(self):
        """The ``cupy.cuda.Function`` on the current device (compiled and loaded on first use)."""
        return self._kernel()

    def _kernel(self, log_stream=None):
        dev = cupy.cuda.runtime.getDevice()
        fn = self._functions.get(dev)
        if fn is None:
            with self._lock:
                fn = self._functions.get(dev)
                if fn is None:
                    mod = device_module(self._build, log_stream)
                    mangled = getattr(mod, "mapping", None) or {}
                    fn = mod.get_function(mangled.get(self.name, self.name))
                    self._functions[dev] = fn
        return fn

    def compile(self, log_stream=None, *, arch: str | None = None) -> None:
        """Compile now. With ``arch`` (e.g. 'sm_90') compile for it without touching the GPU;
        otherwise compile and load for the current device. A name the module does not define
        raises BadInputError naming the kernels it does define, before anything is loaded."""
        if arch is not None:
            _check_defined(self._build.code_for(*_arch_target(arch), log_stream), self.name)
            return
        self._functions.clear()
        self._build.reset()
        if not self._build.is_file:
            _check_defined(self._build.device_code(_compute_capability(), log_stream), self.name)
        self._kernel(log_stream)

    @property
    def attributes(self) -> dict:
        """The kernel's attributes on the current device, as CuPy reports them."""
        return {a: getattr(self, a) for a in _ATTRIBUTES}

    for _a in _ATTRIBUTES:
        locals()[_a] = property(
            _get_attr(_a),
            _set_attr(_a)
            if _a in ("max_dynamic_shared_size_bytes", "preferred_shared_memory_carveout")
            else None,
        )
    del _a

    def __getstate__(self) -> dict:
        return pickling.pickled(
            self._build,
            name=self.name,
            enable_cooperative_groups=self.enable_cooperative_groups,
            entry=self._entry,
            check_pointers=self.check_pointers,
        )

    def __setstate__(self, state: dict) -> None:
        build = pickling.unpickled(state, "RawKernel")
        cooperative = state["enable_cooperative_groups"]
        self._init(build, state["name"], cooperative, jitify=True if build.jitify else None)
        self._entry = state.get("entry", self.name)
        self.check_pointers = state.get("check_pointers", True)

    def __repr__(self) -> str:
        return f"<cupy_rawcode.RawKernel {self.name!r}>"


def _check_defined(code: Code, name: str) -> None:
    """Raise BadInputError when ``name`` (a kernel name, or a name expression's lowered name) is
    not an entry function of the compiled code, naming those it has."""
    entries = strip.entry_functions(code.data, code.kind)
    if code.symbols.get(name, name) in entries:
        return
    spelled = {v: k for k, v in code.symbols.items()}
    own = sorted(e for e in entries if not e.startswith("__nv_"))  # not the device runtime's
    names = [f"{spelled[e]} ({e})" if e in spelled else e for e in own[:20]]
    names += [f"and {len(own) - 20} more"] if len(own) > 20 else []
    raise errors.BadInputError(
        f"kernel {name!r} is not defined in the compiled module ({code.kind}); it defines "
        + (", ".join(names) if names else "no kernel")
        + ' (an extern "C" kernel keeps its name; a template or C++ one needs its name '
        "expression, through RawModule(name_expressions=...).get_function)"
    )


class RawModule:
    """``cupy.RawModule`` with cupy-rawcode's header resolution, shim headers and cache.

    ``path=`` loads a cubin, PTX or fatbin file as CuPy does, and also compiles a ``.cu`` file
    (with the options and name expressions, which CuPy ignores for paths). ``jitify`` and
    ``backend='nvcc'`` as for RawKernel."""

    code, options, file_path, name_expressions, translate_cucomplex = _FROM_BUILD

    def __new__(cls, *args, **kwargs):
        return _cupy_for_nvcc("RawModule", args, kwargs, None) or super().__new__(cls)

    def __init__(
        self,
        *,
        code: str | None = None,
        path: str | os.PathLike | None = None,
        options: tuple = (),
        backend: str = "nvrtc",
        translate_cucomplex: bool = False,
        enable_cooperative_groups: bool = False,
        name_expressions=None,
        jitify: bool | None = None,
    ):
        if (code is None) == (path is None):
            raise errors.RawcodeTypeError(
                "Exactly one of `code` and `path` keyword arguments must be given."
            )
        if code is not None and not isinstance(code, str):
            raise errors.RawcodeTypeError(f"code must be str, not {type(code).__name__}")
        if code is not None:
            _check_code(code)
        _check_backend(backend)
        options = _check_options(options)
        path = os.fspath(path) if path is not None else None
        is_binary = path is not None and not path.endswith(".cu")
        if name_expressions is not None:
            if is_binary:
                raise errors.RawcodeValueError(
                    f"name_expressions need CUDA C++ source; {path} is compiled"
                )
            name_expressions = inputs.name_expressions(name_expressions)  # a str: refused
        if is_binary and (options or translate_cucomplex):
            raise errors.RawcodeValueError(
                f"options and translate_cucomplex apply to source, not to {path}"
            )
        if is_binary and jitify:
            raise errors.RawcodeValueError(
                "Jitify does not support precompiled objects"  # CuPy's words
            )
        self._build = _Build(
            code, path, options, bool(translate_cucomplex), name_expressions, jitify=bool(jitify)
        )
        self.enable_cooperative_groups, self.backend, self.jitify = (
            bool(enable_cooperative_groups),
            backend,
            jitify,
        )

    @property
    def module(self):
        """The ``cupy.cuda.function.Module`` on the current device."""
        return device_module(self._build)

    def compile(self, log_stream=None, *, arch: str | None = None) -> None:
        """Compile now (for ``arch`` without a GPU, else for the current device, and load)."""
        if arch is not None:
            if self._build.is_file:
                raise errors.RawcodeValueError(f"{self._build.path} is already compiled")
            self._build.code_for(*_arch_target(arch), log_stream)
            return
        self._build.reset()
        device_module(self._build, log_stream)

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name``: a plain name, or one of the name expressions."""
        if not isinstance(name, str):
            raise errors.RawcodeTypeError(f"name must be str, not {type(name).__name__}")
        _check_name(name)
        k = RawKernel._from_build(self._build, name, self.enable_cooperative_groups)
        _ = k.kernel  # loads now, as CuPy does, so a wrong name fails here
        mapping = getattr(device_module(self._build), "mapping", None) or {}
        k.name = k.__name__ = mapping.get(name, name)
        return k  # k._entry stays ``name``: the signature is looked up by it

    def get_global(self, name: str):
        """A ``cupy.cuda.MemoryPointer`` to the global symbol ``name`` on the current device."""
        from cupy.cuda.memory import MemoryPointer, UnownedMemory

        mod = self.module
        mapping = getattr(mod, "mapping", None) or {}
        ptr = mod.get_global_var(mapping.get(name, name))
        return MemoryPointer(UnownedMemory(ptr, 0, mod, cupy.cuda.runtime.getDevice()), 0)

    def __getstate__(self) -> dict:
        return pickling.pickled(
            self._build, enable_cooperative_groups=self.enable_cooperative_groups
        )

    def __setstate__(self, state: dict) -> None:
        self._build = pickling.unpickled(state, "RawModule")
        self.enable_cooperative_groups = state["enable_cooperative_groups"]
        self.backend, self.jitify = "nvrtc", True if self._build.jitify else None

    def __repr__(self) -> str:
        what = f"path={self._build.path!r}" if self._build.path else "code=..."
        return f"<cupy_rawcode.RawModule {what}>"
