"""The zstd codec of entries of ``entry.ZSTD_FROM`` bytes or more: loaded on the first such
entry read or written, not with entry.py (a warm hit of a smaller kernel, most of them, loads
neither this module nor zstandard). Only zstandard's C backend is loaded where it can be: it
costs a process 0.5-1 ms, the package whole 2 ms (it imports ``platform``). Where zstandard is
missing, or older than 0.22, ``compress`` answers None (the code is deflated instead) and a
zstd entry read is a miss naming the extra.
"""

from __future__ import annotations

import os
import sys
import threading

from ..ground import deferred

errors = deferred("cupy_rawcode.ground.errors")  # EntryError: a broken entry only

LEVEL = 3  # zstd's default: 3.2x on the cache's cubins, about 3 ms per MiB

_lock = threading.Lock()
_backend: list = []  # [the module with ZstdCompressor, ZstdDecompressor, frame_content_size]
_missing: list[str] = []  # why zstandard could not be loaded, once known
_local = threading.local()  # .dctx: this thread's decompressor (one is not shared by threads)


def compress(code: bytes) -> bytes | None:
    """``code`` as one zstd frame declaring its size, or None where zstandard is not usable."""
    zstd = load()
    if zstd is None:
        return None
    return zstd.ZstdCompressor(level=LEVEL, write_content_size=True).compress(code)


def _c_backend():
    """zstandard's C extension, loaded without the package ``__init__`` (which imports
    ``platform``: 1.5 ms more), whatever backend zstandard's own import would choose (they
    read and write the same frames); None where that cannot be done (not CPython, an unusual
    install): then the package is imported as usual."""
    if sys.implementation.name != "cpython":
        return None
    found = sys.modules.get("zstandard.backend_c")
    if found is not None:
        return found
    import importlib.machinery
    import importlib.util

    spec = importlib.util.find_spec("zstandard")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "backend_c" + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader("zstandard.backend_c", path)
                sub = importlib.util.spec_from_file_location(
                    "zstandard.backend_c", path, loader=loader
                )
                if sub is None:
                    return None
                module = importlib.util.module_from_spec(sub)
                loader.exec_module(module)
                sys.modules["zstandard.backend_c"] = module  # `import zstandard` reuses it
                return module
    return None


def load():
    """The zstd backend, or None when zstandard is not installed or is older than 0.22, whose
    decompressor cannot refuse bytes after a frame (``_missing`` says why): then large code is
    deflated, and a zstd entry read is a miss naming the extra."""
    if _backend:
        return _backend[0]
    if _missing:
        return None
    with _lock:
        if _backend or _missing:
            return _backend[0] if _backend else None
        try:
            module = _c_backend()
        except Exception:  # an unusual install: the package's own import decides
            module = None
        if module is None or not hasattr(module, "frame_content_size"):
            try:
                import zstandard as module
            except ImportError as e:
                _missing.append(str(e))
                return None
        if not _refuses_extra_data(module):
            _missing.append("zstandard older than 0.22 cannot refuse bytes after a frame")
            return None
        _backend.append(module)
        return module


def _refuses_extra_data(zstd) -> bool:
    """Whether the backend's decompressor takes ``allow_extra_data`` (zstandard 0.22 and
    later), tried once on an empty frame."""
    try:
        frame = zstd.ZstdCompressor(write_content_size=True).compress(b"")
        zstd.ZstdDecompressor().decompress(frame, allow_extra_data=False)
    except TypeError:
        return False
    return True


def _decompressor(zstd):
    """This thread's decompressor: made once (10 us, half of a small cubin's decode)."""
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstd.ZstdDecompressor()
    return dctx


def decompress(packed: bytes, size: int) -> bytes:
    """The ``size`` bytes the zstd frame ``packed`` holds. The frame must declare exactly
    ``size`` (checked before anything is decompressed), give exactly that many and be all of
    ``packed``."""
    zstd = load()
    if zstd is None:
        raise errors.EntryError(
            f"compressed with zstd, and zstandard is not usable here ({_missing[0]}): "
            "pip install 'cupy-rawcode[zstd]'"
        )
    try:
        declared = zstd.frame_content_size(packed)
    except Exception as e:  # zstandard's ZstdError: no frame header
        raise errors.EntryError(f"not a zstd frame ({e})") from None
    if declared != size:
        raise errors.EntryError(f"the zstd frame declares {declared} bytes, not {size}")
    try:
        # one frame and nothing after it, as zlib's stream must end where the entry does
        code = _decompressor(zstd).decompress(packed, max_output_size=size, allow_extra_data=False)
    except Exception as e:  # ZstdError: a damaged frame
        raise errors.EntryError(f"damaged zstd data ({e})") from None
    if len(code) != size:
        raise errors.EntryError(f"zstd data gave {len(code)} bytes, not {size}")
    return code
