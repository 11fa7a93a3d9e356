"""Building a drop-in's module for a device: its inputs checked at the first compile, then the
warm index, else key, store and compile (waiting for a background warmup's compile of the same
inputs), reported and recorded; the module loaded once per device for every object of the same
inputs, as CuPy's ``_get_raw_module`` memo does, under one lock that racing launches share."""

from __future__ import annotations  # unevaluated: less work on a warm hit

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

# the warm index, read as keys.index_lookup (a module attribute: bench/warm_phases.py wraps it)
from .. import key as keys
from ..ground import config, deferred
from ..store import default_store
from ..store.entry import entry_log

if TYPE_CHECKING:
    from ..key.request import Request

errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised
inputs = deferred("cupy_rawcode.ground.inputs")  # a source or name that is not plain ASCII
options_module = deferred("cupy_rawcode.headers.options")  # options given (a warm hit: none)
# the orchestrator: the first compile only; a warm hit keys through the index and never loads
# the key path (options, headers, toolkit: tests/key/test_index.py HIT_PATH)
flow = deferred("cupy_rawcode.orchestrator.flow")

_RECORDING = __name__.rsplit(".", 2)[0] + ".hook.recording"  # sys.modules key: never imported here


class Code:
    """Compiled bytes for one architecture: kind is 'cubin' or 'ptx'; symbols maps name
    expressions to mangled names; log is NVRTC's log as replayed to a ``log_stream`` (None, the
    text, or a function that makes it: a warm hit names its program only when asked); arch the
    one compiled for, when known (a device's after an -arch option: what NVRTC made of both).
    A plain slotted class, as on every module of the warm-hit path."""

    __slots__ = ("_log", "arch", "data", "key", "kind", "symbols")

    def __init__(
        self,
        kind: str,
        data: bytes,
        symbols: dict,
        log=None,
        arch: str | None = None,
        key: str | None = None,
    ):
        self.kind, self.data, self.symbols, self._log = kind, data, symbols, log
        self.arch, self.key = arch, key  # the store key it was compiled or found under

    @property
    def log(self) -> str | None:
        """NVRTC's log of this code, as a ``log_stream`` is given it (None: none known)."""
        if callable(self._log):
            self._log = self._log()
        return self._log

    def __eq__(self, other) -> bool:
        same = isinstance(other, Code) and (self.kind, self.data) == (other.kind, other.data)
        return same and self.symbols == other.symbols

    __hash__ = None  # type: ignore[assignment]  # symbols is a dict

    def __repr__(self) -> str:
        return f"Code({self.kind!r}, {len(self.data)} bytes, {len(self.symbols)} symbols)"


def _compute_capability() -> int:
    """The current device's compute capability (e.g. 90)."""
    import cupy

    return int(cupy.cuda.Device().compute_capability)


def _device_target(opts_arch: str | None, cc: int | None = None) -> tuple[str, str]:
    """(arch, target) for a device of compute capability ``cc`` (default: the current one), as
    CuPy chooses them (flow.device_target: the device's arch comes after the options)."""
    if cc is None and flow.needs_device(opts_arch):
        cc = _compute_capability()
    return flow.device_target(opts_arch, cc)


def _arch_target(arch: str) -> tuple[str, str]:
    """(arch, target) for an explicit arch: 'cubin' for sm_XX, 'ptx' for compute_XX."""
    return flow.arch_target(arch)


def report(what: str, arch: str, target: str, key: str, detail: str) -> None:
    """cupy-rawcode's one line on what a compile did, on the 'cupy_rawcode' logger at INFO
    (only when the program uses logging at all: importing it is not on a hit's path)."""
    if "logging" in sys.modules:
        import logging

        logging.getLogger("cupy_rawcode").info(
            "cupy-rawcode: %s %s %s key %s (%s)", what, arch, target, key, detail
        )


def replay(log_stream, log: str | None) -> None:
    """NVRTC's log to CuPy's ``log_stream``, on a compile and on every cache hit alike."""
    if log_stream is not None and log:
        log_stream.write(log)


def build(req: Request, *, log_stream=None, index_id: str | None = None, jitify=False) -> Code:
    """Compile a request through the orchestrator (flow.compile_for; with ``jitify``, as Jitify
    did) into loadable bytes, replaying NVRTC's log to ``log_stream`` and reporting what it
    did."""
    req, result = flow.compile_for(req, index_id=index_id, jitify_mode=jitify)
    replay(log_stream, result.log)
    report(
        "hit" if result.hit else "compiled",
        req.arch,
        req.target,
        result.key,
        f"{result.header_count} headers, {result.key_seconds * 1e3:.1f} ms key, "
        f"{result.compile_seconds:.2f} s compile",
    )
    return Code(req.target, result.code, dict(result.symbols), result.log, req.arch, result.key)


# Compiles a background warmup() is running in its worker processes: plan id (key.index_id of
# the inputs, with 'ccNN' or the explicit arch) -> an Event set when that compile has ended.
# A first launch of one of them waits for it instead of compiling a second time. Empty unless
# a background warmup is running: a launch then pays one truth test.
pending: dict = {}


def _await_warmup(plan_id: str) -> None:
    """Wait for a background warmup() compiling these inputs; a failed one leaves nothing in
    the cache, so the caller then compiles and raises as it would have alone."""
    event = pending.get(plan_id)
    while event is not None and not event.wait(0.05):  # in steps: Ctrl-C is seen (early.py)
        pass


def _indexed(iid: str, log_stream=None, names: tuple = ()) -> tuple[str, Code] | None:
    """(arch, code) through the warm index: the key it recorded for these inputs, read from the
    store; None when the index does not know them (or the store lost the entry). ``names``:
    (source, source directory, file name), what NVRTC's replayed log calls the source."""
    t0 = time.perf_counter()
    found = keys.index_lookup(iid)
    if found is None:
        return None
    t1 = time.perf_counter()
    got = default_store().fetch(found["key"])
    if got is None:
        return None
    code, meta, layer = got
    log = None
    if meta.get("log"):  # named for this program only when replayed (program_name digests)

        def log() -> str:
            return entry_log(meta, keys.program_name(*names) if names else None)

        if log_stream is not None:
            replay(log_stream, log())
    report(
        "hit",
        found["arch"],
        found["target"],
        found["key"],
        f"{found['count']} headers, {(t1 - t0) * 1e3:.1f} ms index, {layer}",
    )
    symbols = dict(meta.get("symbols", {}))
    return found["arch"], Code(found["target"], code, symbols, log, found["arch"], found["key"])


def _note(build: _Build) -> None:
    """Write a build to the record when one is being written (recording.py; started by record()
    or CUPY_RAWCODE_RECORD, never imported here)."""
    rec = sys.modules.get(_RECORDING)
    if rec is not None and rec.recording():
        rec.note_build(build)


class _Build:
    """One module's inputs (source or file), its compiled code per arch, and the process-wide
    record of its loaded modules (joined on the first load: _Shared). Shared by a RawModule and
    every RawKernel it hands out. The inputs are kept as given and checked at the first compile
    (check()), as CuPy checks them only when it compiles."""

    def __init__(
        self,
        code: str | None,
        path: str | None,
        options,
        translate: bool,
        name_expressions,
        compiled: dict[str, Code] | None = None,
        jitify: bool = False,
        cooperative: bool = False,
    ):
        self.code, self.path, self.options, self.jitify = code, path, options, jitify
        self.translate, self.name_expressions = translate, name_expressions
        self.cooperative = cooperative  # in CuPy's memo key: a module of its own
        self.compiled: dict[str, Code] = dict(compiled or {})
        self.device_arch: dict[int, str] = {}  # compute capability -> the arch compiled for it
        self.index_ids: dict[int, str] = {}  # compute capability -> its warm index id
        self.modules: dict[int, object] = {}  # device -> the module this object launches from
        self.codes: dict[int, Code | None] = {}  # device -> that module's code (None: a file)
        self.shared: Any = None  # loading._Shared, once joined (loading imports this module)
        self.checked = False
        self.lock = threading.RLock()

    @property
    def is_file(self) -> bool:
        """A cubin/ptx/fatbin path, loaded as it is (a .cu path is compiled)."""
        return self.path is not None and not self.path.endswith(".cu")

    def check(self) -> None:
        """Check the inputs once, before anything compiles (construction accepts them, as in
        CuPy): code a str without NUL bytes, options a tuple of well-formed str, name
        expressions non-empty str. The options and name expressions become tuples."""
        if self.checked:
            return
        if self.path is None and not isinstance(self.code, str):
            raise errors.RawcodeTypeError(f"code must be str, not {type(self.code).__name__}")
        if self.code is not None:
            _check_code(self.code)
        if not self.is_file:
            self.options = _check_options(self.options)
            if self.name_expressions is not None:
                self.name_expressions = inputs.name_expressions(self.name_expressions)
        self.checked = True

    def share_key(self) -> tuple:
        """What CuPy's ``_get_raw_module`` memo keys a module on, less the backend (ours is
        NVRTC's, checked before) and the log stream (a stored log is replayed instead); and what
        its memo misses: a file's absolute path and its text (a .cu) or stamp (compiled), the
        working directory a relative -I counts from, the environment a key reads. Headers are
        checked when a module is taken (_holds)."""
        return (
            self.code,
            _file_identity(self.path) if self.path is not None else None,
            self.options,
            self.translate,
            self.cooperative,
            self.jitify,
            self.name_expressions,
            os.getcwd() if keys.cwd_matters(self.options) else None,
            tuple(config.key_environment()),
        )

    def source(self) -> tuple[str, str | None]:
        self.check()
        if self.code is not None:
            src, where = self.code, None
        else:
            assert self.path is not None  # a _Build holds code or a path
            from ..ground.inputs import read_source

            src = read_source(self.path)  # checked before translate_cucomplex shifts its lines
            where = os.path.dirname(os.path.abspath(self.path))
        if self.translate:
            from .cucomplex import translate_cucomplex  # off the hit path unless asked for

            src = translate_cucomplex(src)
        return src, where

    @property
    def source_name(self) -> str | None:
        """The .cu file's name (what diagnostics call it), or None for a source string."""
        return os.path.basename(self.path) if self.path is not None else None

    @property
    def compile_options(self) -> tuple[str, ...]:
        """The options compiled: as given, plus CuPy's -DCUPY_USE_JITIFY for jitify=True (it
        keys those compiles apart, in the warm index too)."""
        self.check()
        if not self.jitify:
            return self.options
        from ..orchestrator.jitify import jitify_options  # light: a jitify=True warm hit needs it

        return jitify_options(self.options)

    def arch_option(self) -> str | None:
        return options_module.parse_options(self.options).arch

    def code_for(
        self,
        arch: str,
        target: str,
        log_stream=None,
        index_id: str | None = None,
        source: tuple[str, str | None] | None = None,
        device: bool = False,
    ) -> Code:
        """Compiled code for arch, compiling through the cache once per arch (a later call with
        a ``log_stream`` is given the stored log; ``device``: the arch is a device's, after the
        options as CuPy appends it: make_request)."""
        with self.lock:
            if not device and not self.is_file:  # an explicit arch: an -arch saying otherwise
                self.check()  # fails, whatever was compiled before
                if self.options:
                    options_module.normalize_arch(arch, options_module.parse_options(self.options))
            found = self.compiled.get(arch)
            if found is not None:
                replay(log_stream, found.log)
                return found
            text, where = source or self.source()
            names = self.name_expressions or ()
            if pending:
                _await_warmup(keys.index_id(text, self.compile_options, arch, names, where))
            req = flow.request(
                text,
                arch=arch,
                options=self.compile_options,
                name_expressions=names,
                target=target,
                source_dir=where,
                source_name=self.source_name,
                device=device,
            )
            code = build(req, log_stream=log_stream, index_id=index_id, jitify=self.jitify)
            self.compiled[code.arch or arch] = code  # a device's: what NVRTC made of both
            _note(self)
            return code

    def device_code(self, cc: int, log_stream=None) -> Code:
        """Compiled code for a device of compute capability ``cc``. A warm process finds it
        through the warm index (key/__init__.py: no options, toolchain or request module
        imported); otherwise the options or the toolchain choose the arch and code_for compiles
        through the cache. A ``log_stream`` is given NVRTC's log, stored or fresh, every time."""
        with self.lock:
            arch = self.device_arch.get(cc)
            if arch is not None:
                code = self.compiled[arch]
                replay(log_stream, code.log)
                return code
            source, where = self.source()
            names = self.name_expressions or ()
            iid = keys.index_id(source, self.compile_options, f"cc{cc}", names, where)
            if pending:
                _await_warmup(iid)
            self.index_ids[cc] = iid
            hit = _indexed(iid, log_stream, (source, where, self.source_name))
            if hit is not None:
                arch, code = hit
                code = self.compiled.setdefault(arch, code)
            else:
                arch, target = _device_target(self.arch_option(), cc)
                code = self.code_for(arch, target, log_stream, iid, (source, where), True)
                arch = code.arch or arch
            self.device_arch[cc] = arch
            _note(self)
            return code


def _file_identity(path: str) -> tuple:
    """A file module's identity: its absolute path (a relative one after an os.chdir is another
    file) and its text (a .cu: it is compiled) or stamp (a cubin/ptx/fatbin: loaded as it is)."""
    full = os.path.abspath(path)
    if not path.endswith(".cu"):
        try:
            st = os.stat(full)
        except OSError:
            return (full,)  # loading it says what is wrong
        return (full, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    from ..ground.inputs import read_source

    try:
        return (full, read_source(full))
    except (OSError, ValueError):
        return (full,)  # compiling it says what is wrong


# ------------------------------------------------ a build's checks, at its first compile


def _check_options(options) -> tuple[str, ...]:
    """The options as a tuple, parsed so that a malformed one fails before NVRTC runs, naming
    it (options.py is imported only when there are options: a warm hit needs it no further)."""
    if not isinstance(options, (tuple, list)) or not all(isinstance(o, str) for o in options):
        raise errors.RawcodeTypeError(f"options must be a tuple of str, not {options!r}")
    if options:
        options_module.parse_options(options)
    return tuple(options)


def _check_code(code: str) -> None:
    """A source string NVRTC would misread (a NUL byte, a lone surrogate) fails before NVRTC
    runs, with the line of the code as given (inputs.py is imported only then)."""
    if "\0" in code or not code.isascii():
        inputs.check_source(code, "<source>")
