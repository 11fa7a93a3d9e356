"""CuPy drop-ins: RawKernel and RawModule with CuPy 14's call convention, built by cupy-rawcode.

Constructing never compiles or touches the GPU. The first launch compiles once per
architecture (through the cache) and loads the module once per device; both are guarded by a
lock, so threads racing on a first launch share one compile and one load.
"""

from __future__ import annotations  # unevaluated: less work on a warm hit

import os
import re
import threading
import time

_STATE_VERSION = 1
_CUCOMPLEX_INCLUDE = r"\s*#\s*include\s*<\s*cuComplex\.h\s*>"  # compiled on first use
_CUPY_HEADERS = (
    "cupy/complex.cuh",
    "cupy/carray.cuh",
    "cupy/atomics.cuh",
    "cupy/math_constants.h",
)  # what CuPy prepends when translate_cucomplex=True


_UNPARSED = object()


class SignatureWarning(UserWarning):
    """A kernel's parameters could not be parsed; its launch() is positional-only."""


class Code:
    """Compiled bytes for one architecture: kind is 'cubin' or 'ptx'; symbols maps name
    expressions to mangled names (a plain slotted class, as on every module of the warm-hit
    path)."""

    __slots__ = ("data", "kind", "symbols")

    def __init__(self, kind: str, data: bytes, symbols: dict):
        self.kind, self.data, self.symbols = kind, data, symbols

    def __eq__(self, other) -> bool:
        return isinstance(other, Code) and (self.kind, self.data, self.symbols) == (
            other.kind,
            other.data,
            other.symbols,
        )

    __hash__ = None  # type: ignore[assignment]  # symbols is a dict

    def __repr__(self) -> str:
        return f"Code({self.kind!r}, {len(self.data)} bytes, {len(self.symbols)} symbols)"


def _check_backend(backend: str) -> None:
    if backend not in ("nvrtc", "nvcc"):
        raise ValueError(
            f"backend={backend!r} is not supported: 'nvrtc' (compiled by cupy_rawcode) or "
            "'nvcc' (handed to CuPy's own nvcc path)"
        )


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


def _check_options(options) -> tuple[str, ...]:
    """The options as a tuple, parsed now so that a malformed one fails at construction, naming
    it (options.py is imported only when there are options: a warm hit needs it no further)."""
    if not isinstance(options, (tuple, list)) or not all(isinstance(o, str) for o in options):
        raise TypeError(f"options must be a tuple of str, not {options!r}")
    if options:
        parse_options(options)
    return tuple(options)


def _check_code(code: str) -> None:
    """A source string NVRTC would misread (a NUL byte, a lone surrogate) fails here, at
    construction, with the line of the code as given (inputs.py is imported only then)."""
    if "\0" in code or not code.isascii():
        from .inputs import check_source

        check_source(code, "<source>")


def _check_name(name: str) -> None:
    """A kernel name with a NUL byte (the driver would look up a shorter name) fails here."""
    if "\0" in name or not name.isascii():
        from .inputs import check_name

        check_name(name, "kernel name")


def parse_options(options):
    """options.parse_options, imported on first use (a warm hit never needs it)."""
    from .headers.options import parse_options as parse

    return parse(options)


def translate_cucomplex(source: str) -> str:
    """CuPy's translate_cucomplex: cuComplex.h becomes CuPy's bridge to its complex<T>."""
    lines = [
        (
            "#include <cupy/cuComplex_bridge.h>  // translate_cucomplex\n"
            if re.match(_CUCOMPLEX_INCLUDE, line)
            else line
        )
        for line in source.splitlines(keepends=True)
    ]
    return "".join(f"#include <{h}>\n" for h in _CUPY_HEADERS) + "".join(lines)


def _compute_capability() -> int:
    import cupy

    return int(cupy.cuda.Device().compute_capability)


def _device_target(opts_arch: str | None, cc: int | None = None) -> tuple[str, str]:
    """(arch, target) for a device of compute capability ``cc`` (default: the current one); an
    -arch in the options wins, as in NVRTC."""
    if opts_arch is not None:
        return _arch_target(opts_arch)
    from .toolkit.discovery import choose_arch
    from .toolkit.record import supported_archs

    return choose_arch(_compute_capability() if cc is None else cc, supported_archs())


def report(what: str, arch: str, target: str, key: str, detail: str) -> None:
    """cupy-rawcode's one line on what a compile did, on the 'cupy_rawcode' logger at INFO
    (only when the program uses logging at all: importing it is not on a hit's path)."""
    import sys

    if "logging" in sys.modules:
        import logging

        logging.getLogger("cupy_rawcode").info(
            "cupy-rawcode: %s %s %s key %s (%s)", what, arch, target, key, detail
        )


def replay(log_stream, log: str | None) -> None:
    """NVRTC's log to CuPy's ``log_stream``, on a compile and on every cache hit alike."""
    if log_stream is not None and log:
        log_stream.write(log)


def build(
    source: str,
    options: tuple[str, ...],
    arch: str,
    target: str,
    name_expressions: tuple[str, ...],
    source_dir: str | None,
    log_stream=None,
    index_id: str | None = None,
    source_name: str | None = None,
    jitify: bool = False,
) -> Code:
    """Compile through the cache into loadable bytes (compile_for; with ``jitify``, as Jitify
    did: jitify_compat.compile_as_jitify), replaying NVRTC's log to ``log_stream`` and
    reporting what it did."""
    if jitify:
        from .jitify_compat import compile_as_jitify as compile_with
    else:
        from .compiler.program import compile_parsed as compile_with
    req, result = compile_with(
        source, options, arch, target, name_expressions, source_dir, index_id, source_name
    )
    replay(log_stream, result.log)
    report(
        "hit" if result.hit else "compiled",
        req.arch,
        req.target,
        result.key,
        f"{result.header_count} headers, {result.key_seconds * 1e3:.1f} ms key, "
        f"{result.compile_seconds:.2f} s compile",
    )
    return Code(target, result.code, dict(result.symbols))


# Compiles a background warmup() is running in its worker processes: plan id (index.index_id of
# the inputs, with 'ccNN' or the explicit arch) -> an Event set when that compile has ended.
# A first launch of one of them waits for it instead of compiling a second time. Empty unless
# a background warmup is running: a launch then pays one truth test.
pending: dict = {}


def _await_warmup(plan_id: str) -> None:
    """Wait for a background warmup() compiling these inputs; a failed one leaves nothing in
    the cache, so the caller then compiles and raises as it would have alone."""
    event = pending.get(plan_id)
    if event is not None:
        event.wait()


def _indexed(iid: str, log_stream=None, names: tuple = ()) -> tuple[str, Code] | None:
    """(arch, code) through the warm index: the key it recorded for these inputs, read from the
    store; None when the index does not know them (or the store lost the entry). ``names``:
    (source, source directory, file name), what NVRTC's replayed log calls the source."""
    from .key import index
    from .store import default_store

    t0 = time.perf_counter()
    found = index.lookup(iid)
    if found is None:
        return None
    t1 = time.perf_counter()
    got = default_store().fetch(found.key)
    if got is None:
        return None
    code, meta, layer = got
    if log_stream is not None and meta.get("log"):
        from .key import program_name
        from .store.entry import entry_log

        replay(log_stream, entry_log(meta, program_name(*names) if names else None))
    report(
        "hit",
        found.arch,
        found.target,
        found.key,
        f"{found.count} headers, {(t1 - t0) * 1e3:.1f} ms index, {layer}",
    )
    return found.arch, Code(found.target, code, dict(meta.get("symbols", {})))


def _note(build: _Build) -> None:
    """Write a build to the record when one is being written (recording.py; started by record()
    or CUPY_RAWCODE_RECORD, never imported here)."""
    import sys

    rec = sys.modules.get(__package__ + ".recording")
    if rec is not None and rec.recording():
        rec.note_build(build)


def _load_module(code: Code):
    """Load compiled bytes into a CuPy Module on the current device (cubin and PTX alike)."""
    from cupy.cuda.function import Module

    mod = Module()
    mod.load(code.data)
    if code.symbols:
        mod._set_mapping(dict(code.symbols))
    return mod


def _load_file(path: str):
    from cupy.cuda.function import Module

    mod = Module()
    mod.load_file(path)
    return mod


class _Build:
    """One module's source (or file), its compiled code per arch and its loaded module per
    device. Shared by a RawModule and every RawKernel it hands out."""

    def __init__(
        self,
        code: str | None,
        path: str | None,
        options: tuple[str, ...],
        translate: bool,
        name_expressions: tuple[str, ...] | None,
        compiled: dict[str, Code] | None = None,
        jitify: bool = False,
    ):
        self.code, self.path, self.options, self.jitify = code, path, options, jitify
        self.translate, self.name_expressions = translate, name_expressions
        self.compiled: dict[str, Code] = dict(compiled or {})
        self.device_arch: dict[int, str] = {}  # compute capability -> the arch compiled for it
        self.modules: dict[int, object] = {}
        self.lock = threading.RLock()

    @property
    def is_file(self) -> bool:
        """A cubin/ptx/fatbin path, loaded as it is (a .cu path is compiled)."""
        return self.path is not None and not self.path.endswith(".cu")

    def source(self) -> tuple[str, str | None]:
        if self.code is not None:
            src, where = self.code, None
        else:
            assert self.path is not None  # a _Build holds code or a path
            from .inputs import read_source

            src = read_source(self.path)  # checked before translate_cucomplex shifts its lines
            where = os.path.dirname(os.path.abspath(self.path))
        return (translate_cucomplex(src) if self.translate else src), where

    @property
    def source_name(self) -> str | None:
        """The .cu file's name (what diagnostics call it), or None for a source string."""
        return os.path.basename(self.path) if self.path is not None else None

    @property
    def compile_options(self) -> tuple[str, ...]:
        """The options compiled: as given, plus CuPy's -DCUPY_USE_JITIFY for jitify=True (it
        keys those compiles apart, in the warm index too)."""
        if not self.jitify:
            return self.options
        from .jitify_compat import jitify_options

        return jitify_options(self.options)

    def arch_option(self) -> str | None:
        return parse_options(self.options).arch

    def code_for(
        self,
        arch: str,
        target: str,
        log_stream=None,
        index_id: str | None = None,
        source: tuple[str, str | None] | None = None,
    ) -> Code:
        """Compiled code for arch, compiling through the cache once per arch."""
        with self.lock:
            found = self.compiled.get(arch)
            if found is not None:
                return found
            text, where = source or self.source()
            if pending:
                from .key.index import index_id as plan_id

                options = self.compile_options
                _await_warmup(plan_id(text, options, arch, self.name_expressions or (), where))
            code = build(
                text,
                self.compile_options,
                arch,
                target,
                self.name_expressions or (),
                where,
                log_stream,
                index_id,
                self.source_name,
                self.jitify,
            )
            self.compiled[arch] = code
            _note(self)
            return code

    def device_code(self, cc: int, log_stream=None) -> Code:
        """Compiled code for a device of compute capability ``cc``. A warm process finds it
        through the index (index.py: no options, toolchain or key module imported); otherwise
        the options or the toolchain choose the arch and code_for compiles through the cache."""
        with self.lock:
            arch = self.device_arch.get(cc)
            if arch is not None:
                return self.compiled[arch]
            source, where = self.source()
            from .key.index import index_id

            names = self.name_expressions or ()
            iid = index_id(source, self.compile_options, f"cc{cc}", names, where)
            if pending:
                _await_warmup(iid)
            hit = _indexed(iid, log_stream, (source, where, self.source_name))
            if hit is not None:
                arch, code = hit
                code = self.compiled.setdefault(arch, code)
            else:
                arch, target = _device_target(self.arch_option(), cc)
                code = self.code_for(arch, target, log_stream, iid, (source, where))
            self.device_arch[cc] = arch
            _note(self)
            return code

    def module(self, log_stream=None):
        """The CuPy Module for the current device, compiled and loaded on first use."""
        import cupy

        dev = cupy.cuda.runtime.getDevice()
        mod = self.modules.get(dev)
        if mod is not None:
            return mod
        with self.lock:
            mod = self.modules.get(dev)
            if mod is None:
                if self.is_file:
                    assert self.path is not None  # is_file: the path of a cubin/ptx/fatbin
                    mod = _load_file(self.path)
                else:
                    mod = _load_module(self.device_code(_compute_capability(), log_stream))
                self.modules[dev] = mod
            return mod

    def reset(self) -> None:
        with self.lock:
            self.modules.clear()
            self.device_arch.clear()

    def state(self) -> dict:
        return {
            "code": self.code,
            "path": self.path,
            "options": self.options,
            "translate_cucomplex": self.translate,
            "name_expressions": self.name_expressions,
            "compiled": {a: (c.kind, c.data, dict(c.symbols)) for a, c in self.compiled.items()},
            "jitify": self.jitify,
        }

    @classmethod
    def from_state(cls, s: dict) -> _Build:
        compiled = {a: Code(k, bytes(d), dict(m)) for a, (k, d, m) in s["compiled"].items()}
        return cls(
            s["code"],
            s["path"],
            tuple(s["options"]),
            s["translate_cucomplex"],
            s["name_expressions"],
            compiled,
            bool(s.get("jitify")),
        )


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
    from cupy_backends.cuda.api import driver

    return driver, getattr(driver, "CU_FUNC_ATTRIBUTE_" + name.upper())


def _get_attr(name: str):
    def get(self) -> int:
        driver, attr = _driver_attr(name)
        return driver.funcGetAttribute(attr, self.kernel.ptr)

    get.__doc__ = f"The kernel's {name} on the current device (cuFuncGetAttribute)."
    return get


def _set_attr(name: str):
    def set_(self, value: int) -> None:
        driver, attr = _driver_attr(name)
        driver.funcSetAttribute(self.kernel.ptr, attr, value)

    return set_


class RawKernel:
    """``cupy.RawKernel`` with cupy-rawcode's header resolution, shim headers and cache.

    ``k(grid, block, args, *, shared_mem=0, stream=None)`` launches exactly as CuPy does.
    ``jitify=True`` compiles as Jitify did (errors are also JitifyException, an include in a
    header that matches no file is dropped with a warning); ``backend='nvcc'`` returns CuPy's
    own ``cupy.RawKernel``."""

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
            raise TypeError(f"code must be str, not {type(code).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"name must be str, not {type(name).__name__}")
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

    code = property(lambda self: self._build.code, doc="The CUDA source (None for a file).")
    options = property(lambda self: self._build.options, doc="The options as given.")
    file_path = property(lambda self: self._build.path)
    name_expressions = property(lambda self: self._build.name_expressions)
    translate_cucomplex = property(lambda self: self._build.translate)

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
                raise TypeError(
                    f"{self._entry}: keyword arguments need a parsed signature, and "
                    f"this kernel's could not be parsed ({self._signature_error})"
                )
            values = args
        else:
            from .launch.bind import bind

            values = bind(sig, args, kwargs, check_pointers=self.check_pointers)
        self(grid, block, values, shared_mem=shared_mem, stream=stream)

    @property
    def signature(self):
        """The parsed parameters (a ``cupy_rawcode.launch.signature.Signature``), or None with a
        warning when the declaration cannot be parsed safely (launch is then positional)."""
        if self._signature is _UNPARSED:
            self._signature = self._parse_signature()
        return self._signature

    def _parse_signature(self):
        import warnings

        from .launch.bind import signature_for
        from .launch.signature import SignatureError

        self._signature_error = None
        try:
            if self._build.is_file:
                raise SignatureError(f"{self._build.path} is compiled code, with no source")
            source, where = self._build.source()
            opts = parse_options(self._build.options)
            return signature_for(source, self._entry, opts, where)
        except (SignatureError, OSError, UnicodeDecodeError) as e:
            self._signature_error = str(e)
            warnings.warn(
                f"cupy_rawcode: cannot parse the parameters of {self._entry!r} ({e}); "
                "launch() takes positional arguments only and converts nothing",
                SignatureWarning,
                stacklevel=3,
            )
            return None

    @property
    def kernel(self):
        """The ``cupy.cuda.Function`` on the current device (compiled and loaded on first use)."""
        return self._kernel()

    def _kernel(self, log_stream=None):
        import cupy

        dev = cupy.cuda.runtime.getDevice()
        fn = self._functions.get(dev)
        if fn is None:
            with self._lock:
                fn = self._functions.get(dev)
                if fn is None:
                    mod = self._build.module(log_stream)
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
        return {
            "version": _STATE_VERSION,
            "build": self._build.state(),
            "name": self.name,
            "enable_cooperative_groups": self.enable_cooperative_groups,
            "entry": self._entry,
            "check_pointers": self.check_pointers,
        }

    def __setstate__(self, state: dict) -> None:
        _check_state(state, "RawKernel")
        build = _Build.from_state(state["build"])
        cooperative = state["enable_cooperative_groups"]
        self._init(build, state["name"], cooperative, jitify=True if build.jitify else None)
        self._entry = state.get("entry", self.name)
        self.check_pointers = state.get("check_pointers", True)

    def __repr__(self) -> str:
        return f"<cupy_rawcode.RawKernel {self.name!r}>"


def _check_defined(code: Code, name: str) -> None:
    """Raise BadInputError when ``name`` (a kernel name, or a name expression's lowered name) is
    not an entry function of the compiled code, naming those it has."""
    from .compiler.strip import entry_functions

    entries = entry_functions(code.data, code.kind)
    if code.symbols.get(name, name) in entries:
        return
    from .inputs import BadInputError

    spelled = {v: k for k, v in code.symbols.items()}
    own = sorted(e for e in entries if not e.startswith("__nv_"))  # not the device runtime's
    names = [f"{spelled[e]} ({e})" if e in spelled else e for e in own[:20]]
    names += [f"and {len(own) - 20} more"] if len(own) > 20 else []
    raise BadInputError(
        f"kernel {name!r} is not defined in the compiled module ({code.kind}); it defines "
        + (", ".join(names) if names else "no kernel")
        + ' (an extern "C" kernel keeps its name; a template or C++ one needs its name '
        "expression, through RawModule(name_expressions=...).get_function)"
    )


def _arch_target(arch: str) -> tuple[str, str]:
    from .headers.options import Options, normalize_arch

    a = normalize_arch(arch, Options())
    return a, ("ptx" if a.startswith("compute_") else "cubin")


def _check_state(state: dict, what: str) -> None:
    import pickle

    if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
        raise pickle.UnpicklingError(
            f"this pickled {what} was made by another cupy_rawcode version; create it again"
        )


class RawModule:
    """``cupy.RawModule`` with cupy-rawcode's header resolution, shim headers and cache.

    ``path=`` loads a cubin, PTX or fatbin file as CuPy does, and also compiles a ``.cu`` file
    (with the options and name expressions, which CuPy ignores for paths). ``jitify`` and
    ``backend='nvcc'`` as for RawKernel."""

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
            raise TypeError("Exactly one of `code` and `path` keyword arguments must be given.")
        if code is not None and not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        if code is not None:
            _check_code(code)
        _check_backend(backend)
        options = _check_options(options)
        path = os.fspath(path) if path is not None else None
        is_binary = path is not None and not path.endswith(".cu")
        if name_expressions is not None:
            if is_binary:
                raise ValueError(f"name_expressions need CUDA C++ source; {path} is compiled")
            from .inputs import name_expressions as checked  # a str is refused, not split

            name_expressions = checked(name_expressions)
        if is_binary and (options or translate_cucomplex):
            raise ValueError(f"options and translate_cucomplex apply to source, not to {path}")
        if is_binary and jitify:
            raise ValueError("Jitify does not support precompiled objects")  # CuPy's words
        self._build = _Build(
            code, path, options, bool(translate_cucomplex), name_expressions, jitify=bool(jitify)
        )
        self.enable_cooperative_groups, self.backend, self.jitify = (
            bool(enable_cooperative_groups),
            backend,
            jitify,
        )

    code = property(lambda self: self._build.code)
    file_path = property(lambda self: self._build.path)
    options = property(lambda self: self._build.options)
    name_expressions = property(lambda self: self._build.name_expressions)
    translate_cucomplex = property(lambda self: self._build.translate)

    @property
    def module(self):
        """The ``cupy.cuda.function.Module`` on the current device."""
        return self._build.module()

    def compile(self, log_stream=None, *, arch: str | None = None) -> None:
        """Compile now (for ``arch`` without a GPU, else for the current device, and load)."""
        if arch is not None:
            if self._build.is_file:
                raise ValueError(f"{self._build.path} is already compiled")
            self._build.code_for(*_arch_target(arch), log_stream)
            return
        self._build.reset()
        self._build.module(log_stream)

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name``: a plain name, or one of the name expressions."""
        if not isinstance(name, str):
            raise TypeError(f"name must be str, not {type(name).__name__}")
        _check_name(name)
        k = RawKernel._from_build(self._build, name, self.enable_cooperative_groups)
        _ = k.kernel  # loads now, as CuPy does, so a wrong name fails here
        mapping = getattr(self._build.module(), "mapping", None) or {}
        k.name = k.__name__ = mapping.get(name, name)
        return k  # k._entry stays ``name``: the signature is looked up by it

    def get_global(self, name: str):
        """A ``cupy.cuda.MemoryPointer`` to the global symbol ``name`` on the current device."""
        import cupy
        from cupy.cuda.memory import MemoryPointer, UnownedMemory

        mod = self.module
        mapping = getattr(mod, "mapping", None) or {}
        ptr = mod.get_global_var(mapping.get(name, name))
        return MemoryPointer(UnownedMemory(ptr, 0, mod, cupy.cuda.runtime.getDevice()), 0)

    def __getstate__(self) -> dict:
        return {
            "version": _STATE_VERSION,
            "build": self._build.state(),
            "enable_cooperative_groups": self.enable_cooperative_groups,
        }

    def __setstate__(self, state: dict) -> None:
        _check_state(state, "RawModule")
        self._build = _Build.from_state(state["build"])
        self.enable_cooperative_groups = state["enable_cooperative_groups"]
        self.backend, self.jitify = "nvrtc", True if self._build.jitify else None

    def __repr__(self) -> str:
        what = f"path={self._build.path!r}" if self._build.path else "code=..."
        return f"<cupy_rawcode.RawModule {what}>"
