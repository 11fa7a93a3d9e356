"""CuPy's own compiles through the store (install(scope="all"), prebuild and warmup of a
record): keyed by key/cupy.py, the payload CuPy saves stored under that key, loaded back by the
face's loader. What is CuPy's alone (calling CuPy, capturing its payload) stays in hook/."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from ..ground.errors import RawcodeRuntimeError
from ..store import default_store, uncounted
from ..store.entry import CLOSURE_RECORD, encode
from . import failures
from .compiling import HeaderChangedWarning

PAYLOAD = "cupy-payload"  # the entry's target: a payload CuPy saved, not our code
CUPY_FAILURE = "CompileException"  # the class of CuPy's failures kept (failures.py)


def stored(key: str) -> bytes | None:
    """CuPy's payload stored under ``key``, or None (a miss, or an entry that is not one): a
    probe, counted nowhere (no kernel is served)."""
    with uncounted():
        found = _found(key)
    return None if found is None or isinstance(found, dict) else found


def _found(key: str) -> bytes | dict | None:
    """What the store holds under ``key``: CuPy's payload (counted as a hit), a failure record
    (failures.py: its JSON, counted as nothing) or None."""
    found = failures.look_up(default_store(), key, lambda meta: meta.get("target") == PAYLOAD)
    if found is None:
        return None
    code, meta, _ = found
    return failures.read(code, CUPY_FAILURE) if failures.is_failure(meta) else code


def save(key: str, arch: str, payload: bytes, seconds: float, record: str = "") -> None:
    """Store CuPy's payload under our key; ``seconds``: how long CuPy's compile took (what a
    hit saves, in cache stats); ``record``: the key of its closure's portable record
    (key/portable.py), named in the entry so that a bundle or a pull carries it along."""
    meta: dict = {
        "target": PAYLOAD,
        "arch": arch,
        "created": time.time(),
        "compile_seconds": round(seconds, 4),
    }
    if record:
        meta[CLOSURE_RECORD] = record
    store = default_store()
    store.record(False)
    store.put(key, encode(key, payload, meta))


class Failing(NamedTuple):
    """How CuPy's failures are kept (failures.py): ``fields(e)``, the record's fields for an
    exception CuPy raised (message, log and what rebuilds it), None for one not to keep;
    ``rebuilt(record)``, the exception again, None for a record that cannot give it (a miss)."""

    fields: Callable[[BaseException], dict | None]
    rebuilt: Callable[[dict], BaseException | None]


def _held(key: str, failing: Failing | None) -> bytes | None:
    """CuPy's payload stored under ``key``, or None; a failure kept there is raised again
    when ``failing`` can rebuild it and failures are wanted (else it is a miss)."""
    found = _found(key)
    if not isinstance(found, dict):
        return found
    error = failing.rebuilt(found) if failing is not None and failures.wanted() else None
    if error is not None:
        raise error
    return None


def serve(
    key: str,
    arch: str,
    load: Callable[[bytes], Any],
    compile: Callable[[], tuple[Any, bytes | None]],
    changed: Callable[[], str | None],
    failing: Failing | None = None,
    record: Callable[[], str] = lambda: "",
):
    """CuPy's compile of one call through the store: the stored payload ``load``-ed (None from
    it: not one CuPy can use), else ``compile()`` (CuPy's result and the payload it saved, or
    None) stored unless ``changed()`` names a header that changed while CuPy compiled (then one
    warning, as compiling.py gives). With ``failing``, a compile error CuPy raised is kept
    under the key (unless a header changed) and raised again from the store next time.
    ``record()``: the closure record the entry names (``save``), asked on a miss only."""
    found = _held(key, failing)
    if found is not None:
        mod = load(found)
        if mod is not None:
            return mod
    return _compiled(key, arch, compile, changed, failing, record)[0]


def _compiled(
    key: str,
    arch: str,
    compile: Callable[[], tuple[Any, bytes | None]],
    changed: Callable[[], str | None],
    failing: Failing | None,
    record: Callable[[], str],
) -> tuple[Any, bytes | None]:
    """``compile()`` (CuPy's result and the payload it saved, or None), its payload stored
    unless ``changed()`` names a header that changed while CuPy compiled (then one warning,
    as compiling.py gives); a compile error kept as ``failing`` says (``_keep``)."""
    t0 = time.perf_counter()
    try:
        result, payload = compile()
    except Exception as e:
        if failing is not None:
            _keep(key, arch, failing.fields(e), changed)
        raise
    if payload is None:
        return result, payload
    path = changed()
    if path is None:
        save(key, arch, payload, time.perf_counter() - t0, record())
    else:
        warnings.warn(
            f"cupy-rawcode: {path} changed while CuPy compiled a kernel that includes it; "
            "the module is used but not cached",
            HeaderChangedWarning,
            stacklevel=5,
        )
    return result, payload


def _keep(key: str, arch: str, fields: dict | None, changed: Callable[[], str | None]) -> None:
    """Keep CuPy's failure record (``fields``: Failing.fields's) under the key, when failures
    are kept and no header changed while CuPy compiled."""
    if fields is None or not failures.wanted() or changed() is not None:
        return
    message, log = fields.pop("message"), fields.pop("log")
    data = failures.record(CUPY_FAILURE, message, log, **fields)
    if data is not None:
        failures.keep(default_store(), key, data, arch)


def ahead(
    key: str,
    arch: str,
    compile: Callable[[], bytes | None],
    changed: Callable[[], str | None] = lambda: None,
    failing: Failing | None = None,
    record: Callable[[], str] = lambda: "",
) -> bool:
    """A call compiled into the store ahead of its launch, unless held already: whether the
    store held it. ``compile()`` gives CuPy's payload, None when it saved none. With
    ``failing``, CuPy's compile error is kept (unless ``changed()`` names a header) and a kept
    one raised again, as serve does; ``record``: as serve's. A held entry is no kernel served:
    counted nowhere."""
    with uncounted():
        if _held(key, failing) is not None:
            return True
    _, payload = _compiled(key, arch, lambda: (None, compile()), changed, failing, record)
    if payload is None:
        raise RawcodeRuntimeError("CuPy compiled but saved nothing (CUPY_CACHE_IN_MEMORY=1?)")
    return False
