"""zstd for an entry's code (entry.py), through the ``zstandard`` package when it is installed
(the ``zstd`` extra; the ``cu12`` and ``cu13`` extras bring it). Without it, entries are
written uncompressed and compressed ones are misses (one warning): never a crash.

The library is loaded on the first compressed entry read or written, not at import: it costs
about 2 ms to import whole (its ``__init__`` imports ``platform``), 0.5 ms for its C backend
alone, which is what ``_load`` takes where it can.
"""

from __future__ import annotations

import os
import sys
import threading

from ..ground import RawcodeError

LEVEL = 3  # zstd's default: 2.7x on stripped cubins, about 4 ms per MiB to compress
MIN_SIZE = 256  # shorter code is stored as it is (a frame's overhead would eat the gain)

_lock = threading.Lock()
_backend: list = []  # [the module with ZstdCompressor, ZstdDecompressor, frame_content_size]
_missing: list[str] = []  # why zstandard could not be loaded, once known
_local = threading.local()  # .dctx: this thread's decompressor (one is not shared by threads)


class CompressionError(RawcodeError, ValueError):
    """Compressed bytes that cannot be trusted or read: the entry holding them is a miss."""


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


def _load():
    """The zstd backend, or None when zstandard is not installed (``_missing`` says why)."""
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
        _backend.append(module)
        return module


def available() -> bool:
    """Whether zstd can be used in this process (loads the library)."""
    return _load() is not None


def compress(code: bytes) -> bytes | None:
    """``code`` as one zstd frame declaring its size, or None: zstandard is not installed, the
    code is shorter than MIN_SIZE, or it did not get smaller."""
    if len(code) < MIN_SIZE:
        return None
    zstd = _load()
    if zstd is None:
        return None
    packed = zstd.ZstdCompressor(level=LEVEL, write_content_size=True).compress(code)
    return packed if len(packed) < len(code) else None


def _decompressor(zstd):
    """This thread's decompressor: made once (10 us, half of a small cubin's decode)."""
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstd.ZstdDecompressor()
    return dctx


def decompress(packed: bytes, size: int) -> bytes:
    """The ``size`` bytes the frame ``packed`` holds. The frame must declare exactly ``size``
    (checked before anything is decompressed: ``size`` was checked against a limit by the
    caller), and must give exactly that many bytes; else CompressionError."""
    zstd = _load()
    if zstd is None:
        raise CompressionError(
            f"compressed with zstd, and zstandard cannot be imported ({_missing[0]}): "
            "pip install 'cupy-rawcode[zstd]'"
        )
    try:
        declared = zstd.frame_content_size(packed)
    except Exception as e:  # zstandard's ZstdError: no frame header
        raise CompressionError(f"not a zstd frame ({e})") from None
    if declared != size:
        raise CompressionError(f"the zstd frame declares {declared} bytes, not {size}")
    try:
        code = _decompressor(zstd).decompress(packed, max_output_size=size)
    except Exception as e:  # ZstdError: a damaged frame
        raise CompressionError(f"damaged zstd data ({e})") from None
    if len(code) != size:
        raise CompressionError(f"zstd data gave {len(code)} bytes, not {size}")
    return code
