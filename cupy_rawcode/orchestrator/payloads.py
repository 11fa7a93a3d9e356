"""CuPy's own compiles through the store (install(scope="all"), prebuild and warmup of a
record): keyed by key/cupy.py, the payload CuPy saves stored under that key, loaded back by the
face's loader. What is CuPy's alone (calling CuPy, capturing its payload) stays in hook/."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from ..ground.errors import RawcodeRuntimeError
from ..store import default_store
from ..store.entry import encode
from .compiling import HeaderChangedWarning

PAYLOAD = "cupy-payload"  # the entry's target: a payload CuPy saved, not our code


def stored(key: str) -> bytes | None:
    """CuPy's payload stored under ``key``, or None (a miss, or an entry that is not one)."""
    found = default_store().fetch(key)
    if found is None or found[1].get("target") != PAYLOAD:
        return None
    return found[0]


def save(key: str, arch: str, payload: bytes) -> None:
    """Store CuPy's payload under our key."""
    meta = {"target": PAYLOAD, "arch": arch, "created": time.time()}
    store = default_store()
    store.record(False)
    store.put(key, encode(key, payload, meta))


def serve(
    key: str,
    arch: str,
    load: Callable[[bytes], Any],
    compile: Callable[[], tuple[Any, bytes | None]],
    changed: Callable[[], str | None],
):
    """CuPy's compile of one call through the store: the stored payload ``load``-ed (None from
    it: not one CuPy can use), else ``compile()`` (CuPy's result and the payload it saved, or
    None) stored unless ``changed()`` names a header that changed while CuPy compiled (then one
    warning, as compiling.py gives)."""
    payload = stored(key)
    if payload is not None:
        mod = load(payload)
        if mod is not None:
            return mod
    mod, captured = compile()
    if captured is None:
        return mod
    path = changed()
    if path is None:
        save(key, arch, captured)
    else:
        warnings.warn(
            f"cupy-rawcode: {path} changed while CuPy compiled a kernel that includes it; "
            "the module is used but not cached",
            HeaderChangedWarning,
            stacklevel=4,
        )
    return mod


def ahead(key: str, arch: str, compile: Callable[[], bytes | None]) -> bool:
    """A call compiled into the store ahead of its launch, unless held already: whether the
    store held it. ``compile()`` gives CuPy's payload, None when it saved none."""
    if stored(key) is not None:
        return True
    payload = compile()
    if payload is None:
        raise RawcodeRuntimeError("CuPy compiled but saved nothing (CUPY_CACHE_IN_MEMORY=1?)")
    save(key, arch, payload)
    return False
