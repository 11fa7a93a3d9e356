"""Loading a drop-in's module, once per device and set of inputs for the process, as CuPy's memo
``_get_raw_module`` keeps them: every object of the same inputs launches from one module (its
``__device__`` state, globals and attributes shared), taken only while its warm index entry
still holds (a header edited since compiles and loads anew); and the one module loader."""

from __future__ import annotations

import os
import threading

from .. import key as keys
from ..ground import WIDTH, check_stamps, config, stamps_digest
from . import building
from .building import Code, _Build, replay


class _Loaded:
    """A module loaded on one device, the code it was loaded from (None: a file) and what says
    it is still current: its compute capability and arch, its warm index id and the key that
    entry held, and once read, the entry's stamps of the program's own headers (_holds)."""

    __slots__ = ("arch", "cc", "code", "iid", "key", "module", "own")

    def __init__(self, module, code: Code | None, cc=0, arch="", iid=None, key=None):
        self.module, self.code, self.cc, self.arch = module, code, cc, arch
        self.iid, self.key = iid, key
        self.own: dict | None = None


class _Shared:
    """The modules loaded for one set of inputs (device -> _Loaded): one entry of CuPy's memo,
    checked against the headers."""

    __slots__ = ("loaded", "lock")

    def __init__(self):
        self.loaded: dict[int, _Loaded] = {}
        self.lock = threading.Lock()


# share_key() -> _Shared, for the process's lifetime, as CuPy's memo (strong references: a
# module loaded stays loaded, so a kernel made again on every call finds it)
_shared: dict[tuple, _Shared] = {}
_shared_lock = threading.Lock()


def _join(build: _Build) -> _Shared:
    """The shared record of ``build``'s inputs, made on first use. Inputs another object has
    loaded are known good: they are checked only when new."""
    try:
        key = build.share_key()  # once: it may stat or read a .cu file
        shared = _shared.get(key)
    except TypeError:  # an unhashable option or name: check() says which
        build.check()
        raise
    if shared is None:
        build.check()  # leaves every input the key holds equal
        with _shared_lock:
            shared = _shared.setdefault(key, _Shared())
    build.checked = True
    build.shared = shared
    return shared


def device_module(build: _Build, log_stream=None):
    """The CuPy Module for the current device, compiled and loaded on first use of these inputs
    in this process; a ``log_stream`` is given NVRTC's log, stored or fresh."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    mod = build.modules.get(dev)
    if mod is None:
        return _load(build, dev, log_stream)
    if log_stream is not None:
        replay(log_stream, _code_log(build, dev))
    return mod


def _code_log(build: _Build, dev: int) -> str | None:
    code = build.codes.get(dev)
    return code.log if code is not None else None


def _holds(held: _Loaded) -> bool:
    """Whether the module loaded for these inputs on ``dev`` is still what they compile to:
    first, its warm index entry still answers with its key (every stamp holds); then, those of
    its stamps outside this package and the installed packages still hold (CCCL, CUDA's and
    CuPy's headers change with an install, as the code the process runs does: CuPy's memo
    sees no header at all; a program's own headers are what is edited while it runs), one
    ``fstatat`` per such header: none for a CUB kernel of no header of its own."""
    if held.own is not None:
        return check_stamps(held.own) is not None
    found = keys.index_stamped(held.iid) if held.iid is not None and held.key else None
    if found is None or found[0]["key"] != held.key:
        return False
    held.own = _programs_own(found[0]["stamps"], found[1])
    return True


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cupy_rawcode/


def _programs_own(record: dict, values: list) -> dict:
    """The part of a stamps record for files outside this package and the site-packages
    directories, its digest made of the ``values`` the record's check read (the same moment:
    no edit slips in between)."""
    installed = tuple(os.path.join(p, "") for p in (_PACKAGE, *config.site_dirs()))
    dirs, kept, at = [], [], 0
    for d, names in record["dirs"]:
        n = WIDTH * len(names)
        if not os.path.join(d, "").startswith(installed):
            dirs.append([d, names])
            kept += values[at : at + n]
        at += n
    return {"dirs": dirs, "digest": stamps_digest(kept)}


def _load(build: _Build, dev: int, log_stream):
    shared = build.shared or _join(build)
    with shared.lock:
        mod = build.modules.get(dev)
        if mod is not None:  # loaded by another thread of this object
            replay(log_stream, _code_log(build, dev))
            return mod
        held = shared.loaded.get(dev)
        if held is not None and (build.is_file or _holds(held)):
            if held.code is not None:  # this object's code too: its pickle carries the bytes
                build.compiled.setdefault(held.arch, held.code)
                build.device_arch.setdefault(held.cc, held.arch)
            replay(log_stream, held.code.log if held.code is not None else None)
        elif build.is_file:
            assert build.path is not None  # is_file: the path of a cubin/ptx/fatbin
            held = shared.loaded[dev] = _Loaded(_load_file(build.path), None)
        else:
            cc = building._compute_capability()
            new = build.device_code(cc, log_stream)
            # the same code (an entry the index lacks is compared by its bytes) keeps its
            # module; new inputs, or a header changed since, load anew. A later object checks
            # this entry: its key is the one this code was found or compiled under.
            same = held is not None and held.code is not None and held.code == new
            module = held.module if held is not None and same else _load_module(new)
            held = shared.loaded[dev] = _Loaded(
                module, new, cc, build.device_arch[cc], build.index_ids.get(cc), new.key
            )
        build.codes[dev], build.modules[dev] = held.code, held.module
        return held.module


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
