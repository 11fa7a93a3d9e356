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


class _Shared:
    """The modules loaded for one set of inputs, per device, with the code each was loaded
    from and what says it is still current (its compute capability and arch, its warm index id
    and the key that entry held): one entry of CuPy's memo, checked against the headers."""

    __slots__ = ("codes", "held", "lock", "modules")

    def __init__(self):
        self.modules: dict[int, object] = {}
        self.codes: dict[int, Code | None] = {}
        # device -> (cc, arch, index id, key, the entry's stamps outside the package, once read)
        self.held: dict[int, tuple[int, str, str | None, str | None, dict | None]] = {}
        self.lock = threading.Lock()


# share_key() -> _Shared, for the process's lifetime, as CuPy's memo (strong references: a
# module loaded stays loaded, so a kernel made again on every call finds it)
_shared: dict[tuple, _Shared] = {}
_shared_lock = threading.Lock()


def _join(build: _Build) -> _Shared:
    """The shared record of ``build``'s inputs, made on first use. Inputs another object has
    loaded are known good: they are checked only when new."""
    try:
        shared = _shared.get(build.share_key())
    except TypeError:  # an unhashable option or name: check() says which
        shared = None
    if shared is None:
        build.check()
        with _shared_lock:
            shared = _shared.setdefault(build.share_key(), _Shared())
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


def _holds(shared: _Shared, dev: int) -> bool:
    """Whether the module loaded for these inputs on ``dev`` is still what they compile to:
    first, its warm index entry still answers with its key (every stamp holds); then, those of
    its stamps outside this package and the installed packages still hold (CCCL, CUDA's and
    CuPy's headers change with an install, as the code the process runs does: CuPy's memo
    sees no header at all; a program's own headers are what is edited while it runs), one
    ``fstatat`` per such header: none for a CUB kernel of no header of its own."""
    cc, arch, iid, key, outside = shared.held.get(dev, (0, "", None, None, None))
    if outside is not None:
        return check_stamps(outside) is not None
    found = keys.index_stamped(iid) if iid is not None and key is not None else None
    if found is None or found[0]["key"] != key:
        return False
    shared.held[dev] = (cc, arch, iid, key, _programs_own(found[0]["stamps"], found[1]))
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
        mod, code = shared.modules.get(dev), shared.codes.get(dev)
        if mod is not None and (build.is_file or _holds(shared, dev)):
            if code is not None:  # this object's code too: its pickle carries the bytes
                cc, arch = shared.held[dev][:2]
                build.compiled.setdefault(arch, code)
                build.device_arch.setdefault(cc, arch)
            replay(log_stream, code.log if code is not None else None)
        elif build.is_file:
            assert build.path is not None  # is_file: the path of a cubin/ptx/fatbin
            mod, code = _load_file(build.path), None
        else:
            cc = building._compute_capability()
            new = build.device_code(cc, log_stream)
            if mod is None or code is None or (code.data, code.symbols) != (new.data, new.symbols):
                mod = _load_module(new)  # new inputs, or a header changed since: new code
            # the index entry a later object checks (its key: the one this code was found or
            # compiled under; an entry the index lacks is compared by its bytes instead)
            code, shared.held[dev] = (
                new,
                (cc, build.device_arch[cc], build.index_ids.get(cc), new.key, None),
            )
        shared.codes[dev], shared.modules[dev] = code, mod
        build.codes[dev], build.modules[dev] = code, mod
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
