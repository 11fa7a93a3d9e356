"""CuPy drop-ins: RawKernel and RawModule with CuPy 14's call convention, built by cupy-rawcode.

The classes are here, in the package itself (a warm hit loads one module fewer); building.py
checks their inputs at the first compile (construction takes what CuPy's takes), builds their
code (warm index, key, store, compile, warmups, recording) and loads it once per device for
every object of the same inputs, as CuPy's memo does; explicit.py is compile()'s and the typed
launch's, cucomplex.py translates cuComplex, pickling.py says what a pickle carries. RawKernel
derives from CuPy's own where CuPy is installed (cupyx.scipy.ndimage checks for it).
"""

from __future__ import annotations  # unevaluated: less work on a warm hit

import copyreg
import os
import threading

from ..ground import deferred
from .building import (
    Code,
    _arch_target,
    _Build,
    _compute_capability,
    build,
)
from .loading import device_module

cupy = deferred("cupy")
errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised
binding = deferred("cupy_rawcode.launch.bind")  # a launch() with arguments: its first
explicit = deferred("cupy_rawcode.kernel.explicit")  # compile() and a typed launch only
inputs = deferred("cupy_rawcode.ground.inputs")  # name_expressions given as a str
pickling = deferred("cupy_rawcode.kernel.pickling")  # off the hit path: pickling only

__all__ = ["Code", "RawKernel", "RawModule", "build"]


_UNPARSED = object()

# the kernel attributes CuPy reports (cuFuncGetAttribute), two of them settable: properties of
# RawKernel, here rather than in a module of their own (one module fewer on a warm hit's imports)
_ATTRIBUTES = tuple(
    "max_threads_per_block shared_size_bytes const_size_bytes local_size_bytes num_regs "
    "ptx_version binary_version cache_mode_ca max_dynamic_shared_size_bytes "
    "preferred_shared_memory_carveout".split()
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


# ------------------------------------------------ what construction and a first use check


def _check_backend(backend) -> None:
    if backend != "nvrtc":  # 'nvcc' never gets here: CuPy's own object is made instead
        raise errors.RawcodeValueError(
            f"backend={backend!r} is not supported: 'nvrtc' (compiled by cupy_rawcode) or "
            "'nvcc' (handed to CuPy's own nvcc path)"
        )


def _check_type(what: str, value) -> None:
    """A str argument CuPy types as ``str`` (None passes, as in Cython): a TypeError now."""
    if value is not None and not isinstance(value, str):
        raise errors.RawcodeTypeError(f"{what} must be str, not {type(value).__name__}")


def _given_options(options):
    """The options as constructed: a tuple (a list becomes one), or None (refused at the first
    compile, as CuPy does); anything else is a TypeError now, as CuPy's ``tuple options``."""
    if options is None or type(options) is tuple:
        return options
    if isinstance(options, (tuple, list)):
        return tuple(options)
    raise errors.RawcodeTypeError(f"options must be a tuple of str, not {options!r}")


def _cupy_for_nvcc(cls_name: str, args: tuple, kwargs: dict, position: int | None):
    """CuPy's own RawKernel/RawModule when the call asks for backend='nvcc', else None: nvcc
    compiles whole files with its own preprocessor, so the object is CuPy's, unchanged."""
    backend = kwargs.get("backend")
    if backend is None and position is not None and len(args) > position:
        backend = args[position]
    if backend != "nvcc":
        return None
    from cupy._core import raw  # CuPy's own classes, even where cupy.RawKernel is ours

    return getattr(raw, cls_name)(*args, **kwargs)


def _check_name(name) -> None:
    """A kernel name that is not a str, or has a NUL byte (the driver would look up a shorter
    name), fails before anything compiles."""
    if not isinstance(name, str):
        raise errors.RawcodeTypeError(f"name must be str, not {type(name).__name__}")
    if "\0" in name or not name.isascii():
        inputs.check_name(name, "kernel name")


def _cupy_class(name: str) -> type:
    """CuPy's own ``cupy._core.raw.<name>`` as the base of ours, so that CuPy's isinstance
    checks take our objects (cupyx.scipy.ndimage's generic filters want a cupy.RawKernel, and
    read its name, code and options); ``object`` where CuPy cannot be imported. A process that
    launches a kernel imports CuPy anyway: a warm hit's cost is the same."""
    try:
        from cupy._core import raw
    except Exception:  # not installed, or not importable here: the classes work without it
        return object
    return getattr(raw, name)


# what a RawKernel and a RawModule read from their build or hold, read-only as CuPy's fields
# are: properties of both classes (a base class of its own cost a warm hit's imports more)
_FROM_BUILD = {
    "code": property(lambda self: self._build.code, doc="The CUDA source (None for a file)."),
    "options": property(lambda self: self._build.options, doc="The options (() for a file)."),
    "file_path": property(lambda self: self._build.path, doc="The file (None for code)."),
    "name_expressions": property(lambda self: self._build.name_expressions, doc="As given."),
    "translate_cucomplex": property(lambda self: self._build.translate, doc="Translated?"),
    "backend": property(lambda self: self._backend, doc="'nvrtc' ('nvcc': a compiled file)."),
    "enable_cooperative_groups": property(lambda self: self._cooperative, doc="Cooperative?"),
    "jitify": property(lambda self: self._jitify, doc="jitify as given (None: not given)."),
}


class RawKernel(_cupy_class("RawKernel")):  # type: ignore[misc]
    """``cupy.RawKernel`` with cupy-rawcode's header resolution, shim headers and cache.

    ``k(grid, block, args, *, shared_mem=0, stream=None)`` launches exactly as CuPy does.
    ``jitify=True`` compiles as Jitify did (errors are also JitifyException, an include in a
    header that matches no file is dropped with a warning); ``backend='nvcc'`` returns CuPy's
    own ``cupy.RawKernel``. Objects of the same inputs share one loaded module per device, as
    CuPy's do; the inputs are checked at the first compile or launch, as CuPy's."""

    __slots__ = tuple(
        "_build _name _backend _cooperative _jitify _functions _lock _entry _signature "
        "_signature_error check_pointers".split()
    )

    locals().update(_FROM_BUILD)
    name = property(lambda self: self._name, doc="The kernel's name (mangled, for a template).")
    __name__ = property(lambda self: self._name, doc="The name, as CuPy's (for profilers).")

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
        # CuPy's construction-time errors are its argument types; values fail at first compile
        _check_type("code", code)
        _check_type("name", name)
        _check_type("backend", backend)
        cooperative = bool(enable_cooperative_groups)
        given = (code, None, _given_options(options), bool(translate_cucomplex), None, None)
        self._init(_Build(*given, bool(jitify), cooperative), name, cooperative, backend, jitify)

    def _init(
        self, build: _Build, name: str, cooperative: bool, backend: str = "nvrtc", jitify=None
    ) -> None:
        self._build, self._name = build, name
        self._cooperative, self._backend, self._jitify = cooperative, backend, jitify
        self._functions: dict[int, object] = {}
        self._lock = threading.Lock()
        self._entry = name  # the name or name expression the signature is looked up by
        self._signature: object = _UNPARSED
        self._signature_error: str | None = None
        self.check_pointers = True

    @classmethod
    def _from_build(
        cls, build: _Build, name: str, cooperative: bool, backend: str = "nvrtc"
    ) -> RawKernel:
        k = cls.__new__(cls)
        k._init(build, name, cooperative, backend, jitify=True if build.jitify else None)
        return k

    def _check(self) -> None:
        """This object's own inputs (its build's are its build's): before anything compiles."""
        _check_name(self._name)
        if not self._build.is_file:
            _check_backend(self._backend)

    def __call__(self, grid, block, args, **kwargs) -> None:
        """Launch: ``k(grid, block, args, *, shared_mem=0, stream=None)`` (CuPy's convention)."""
        self.kernel(grid, block, args, enable_cooperative_groups=self._cooperative, **kwargs)

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
            self._check()
            self._signature = explicit.parse_signature(self)
        return self._signature

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
                    self._check()
                    mod = device_module(self._build, log_stream)
                    mangled = getattr(mod, "mapping", None) or {}
                    fn = mod.get_function(mangled.get(self._name, self._name))
                    self._functions[dev] = fn
        return fn

    def compile(self, log_stream=None, *, arch: str | None = None) -> None:
        """Compile now. With ``arch`` (e.g. 'sm_90') compile for it without touching the GPU;
        otherwise compile and load for the current device (a module already loaded for these
        inputs stays as it is, as in CuPy: its log is replayed to ``log_stream``). A name the
        module does not define raises BadInputError naming the kernels it does define, before
        anything is loaded."""
        self._check()
        if arch is not None:
            if self._build.is_file:  # a kernel of a cubin/PTX RawModule: as its module says
                raise errors.RawcodeValueError(f"{self._build.path} is already compiled")
            explicit.check_defined(
                self._build.code_for(*_arch_target(arch), log_stream), self._name
            )
            return
        if not self._build.is_file:
            code = explicit.current_code(self._build, _compute_capability(), log_stream)
            explicit.check_defined(code, self._name)
        self._kernel()

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
            name=self._name,
            enable_cooperative_groups=self._cooperative,
            entry=self._entry,
            check_pointers=self.check_pointers,
            backend=self._backend,
        )

    def __reduce_ex__(self, protocol):
        # every protocol as 2 and up do it (for 0 and 1, copyreg would call CuPy's __init__)
        return copyreg.__newobj__, (type(self),), self.__getstate__()  # type: ignore[attr-defined]

    def __setstate__(self, state: dict) -> None:
        build = pickling.unpickled(state, "RawKernel")
        backend = state.get("backend", "nvcc" if build.is_file else "nvrtc")
        cooperative = state["enable_cooperative_groups"]
        self._init(build, state["name"], cooperative, backend, True if build.jitify else None)
        self._entry = state.get("entry", self._name)
        self.check_pointers = state.get("check_pointers", True)

    def __repr__(self) -> str:
        return f"<cupy_rawcode.RawKernel {self._name!r}>"


class RawModule:
    """``cupy.RawModule`` with cupy-rawcode's header resolution, shim headers and cache.

    ``path=`` loads a cubin, PTX or fatbin file as CuPy does (its options and
    translate_cucomplex ignored, its backend 'nvcc', as in CuPy), and also compiles a ``.cu``
    file (with the options and name expressions). ``jitify`` and ``backend='nvcc'`` as for
    RawKernel. Objects of the same inputs share one loaded module per device, as CuPy's do."""

    __slots__ = ("_build", "_backend", "_cooperative", "_jitify")

    locals().update(_FROM_BUILD)

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
        _check_type("code", code)
        _check_type("backend", backend)
        options = _given_options(options)
        path = os.fspath(path) if path is not None else None
        is_binary = path is not None and not path.endswith(".cu")
        if name_expressions is not None:  # CuPy's construction-time errors, then its tuple()
            if is_binary:
                raise errors.RawcodeValueError(
                    f"name_expressions need CUDA C++ source; {path} is compiled"
                )
            if backend != "nvrtc":
                raise errors.RawcodeValueError(  # CuPy's words
                    "only nvrtc supports retrieving the mangled names for the given name "
                    "expressions"
                )
            if isinstance(name_expressions, (str, bytes)):
                inputs.name_expressions(name_expressions)  # refused: it would be split
            name_expressions = tuple(name_expressions)
        if jitify:
            if is_binary:
                raise errors.RawcodeValueError(
                    "Jitify does not support precompiled objects"  # CuPy's words
                )
            if backend != "nvrtc":
                raise errors.RawcodeValueError("Jitify only supports NVRTC")  # CuPy's words
        if is_binary:  # loaded as it is: CuPy ignores these and reports nvcc
            options, translate_cucomplex, backend = (), False, "nvcc"
        self._cooperative, self._backend = bool(enable_cooperative_groups), backend
        self._jitify = jitify
        given = (code, path, options, bool(translate_cucomplex), name_expressions, None)
        self._build = _Build(*given, bool(jitify), self._cooperative)

    def _check(self) -> None:
        if not self._build.is_file:
            _check_backend(self._backend)

    @property
    def module(self):
        """The ``cupy.cuda.function.Module`` on the current device."""
        self._check()
        return device_module(self._build)

    def compile(self, log_stream=None, *, arch: str | None = None) -> None:
        """Compile now (for ``arch`` without a GPU, else for the current device, and load: a
        module already loaded for these inputs stays as it is, its log replayed)."""
        self._check()
        if arch is not None:
            if self._build.is_file:
                raise errors.RawcodeValueError(f"{self._build.path} is already compiled")
            self._build.code_for(*_arch_target(arch), log_stream)
            return
        if not self._build.is_file:
            explicit.current_code(self._build, _compute_capability(), log_stream)
        device_module(self._build)

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name``: a plain name, or one of the name expressions."""
        _check_name(name)  # a str: the same TypeError _check_type gives
        self._check()
        k = RawKernel._from_build(self._build, name, self._cooperative, self._backend)
        _ = k.kernel  # loads now, as CuPy does, so a wrong name fails here
        mapping = getattr(device_module(self._build), "mapping", None) or {}
        k._name = mapping.get(name, name)
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
            self._build, enable_cooperative_groups=self._cooperative, backend=self._backend
        )

    def __setstate__(self, state: dict) -> None:
        self._build = pickling.unpickled(state, "RawModule")
        self._cooperative = state["enable_cooperative_groups"]
        self._backend = state.get("backend", "nvcc" if self._build.is_file else "nvrtc")
        self._jitify = True if self._build.jitify else None

    def __repr__(self) -> str:
        what = f"path={self._build.path!r}" if self._build.path else "code=..."
        return f"<cupy_rawcode.RawModule {what}>"
