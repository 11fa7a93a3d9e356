"""What a pickled RawKernel or RawModule carries of its build: the source or path, the options
and the compiled code per arch (never a loaded module), under a format version. Off the hit
path: the classes import it when an object is pickled or unpickled."""

from __future__ import annotations

import pickle

from ..ground.errors import RawcodeError
from .building import Code, _Build

_STATE_VERSION = 1


class StateVersionError(RawcodeError, pickle.UnpicklingError):
    """A pickled RawKernel or RawModule of another format version (an UnpicklingError)."""


def build_state(build: _Build) -> dict:
    """A build's picklable state (its compiled code included)."""
    return {
        "code": build.code,
        "path": build.path,
        "options": build.options,
        "translate_cucomplex": build.translate,
        "name_expressions": build.name_expressions,
        "compiled": {a: (c.kind, c.data, dict(c.symbols)) for a, c in build.compiled.items()},
        "jitify": build.jitify,
    }


def build_from_state(s: dict, cooperative: bool = False) -> _Build:
    """The build that build_state described (``cooperative``: its owner's flag, in the key of
    the modules it shares with every object of the same inputs)."""
    compiled = {a: Code(k, bytes(d), dict(m)) for a, (k, d, m) in s["compiled"].items()}
    options, names = s["options"], s["name_expressions"]
    return _Build(
        s["code"],
        s["path"],
        tuple(options) if isinstance(options, (tuple, list)) else options,
        s["translate_cucomplex"],
        tuple(names) if isinstance(names, (tuple, list)) else names,
        compiled,
        bool(s.get("jitify")),
        bool(cooperative),
    )


def pickled(build: _Build, **fields) -> dict:
    """A drop-in's pickled state: the format version, its build's state, then its own fields."""
    return {"version": _STATE_VERSION, "build": build_state(build), **fields}


def unpickled(state: dict, what: str) -> _Build:
    """The build of a pickled ``what`` (RawKernel or RawModule), refusing another version."""
    _check_state(state, what)
    return build_from_state(state["build"], bool(state.get("enable_cooperative_groups")))


def _check_state(state: dict, what: str) -> None:
    """Refuse a pickled state of another format version."""
    if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
        raise StateVersionError(
            f"this pickled {what} was made by another cupy_rawcode version; create it again"
        )
