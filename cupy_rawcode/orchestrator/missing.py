"""A missing header as the CompileException a compile raises: the resolver's MissingHeaderError
before NVRTC runs, and NVRTC's "cannot open source file" for an include the resolver left to it
(inside an #if that a scan cannot decide), told as the resolver tells it: the include chain and
the directories searched, and so the answers a retry has (flow._retrying)."""

from __future__ import annotations

from ..ground import deferred, errors  # errors' CuPy-based classes are built on first use
from ..ground.errors import MissingHeaderError
from ..key.request import Request, request_closure

nvrtc = deferred("cupy_rawcode.compiler.nvrtc")  # NVRTC's flags, for the message
nvrtclog = deferred("cupy_rawcode.ground.nvrtclog")  # a failed compile's log only


def as_compile_error(e, req: Request, ctx, log: str | None = None):
    """The resolver's MissingHeaderError as the CompileException NVRTC's failure would raise
    (``log``: NVRTC's, when NVRTC ran)."""
    flags = nvrtc.nvrtc_flags(req, ctx)  # a failed key: NVRTC's flags for the message
    msg = e.args[0] if e.args else str(e)
    return errors.MissingHeaderCompileError(
        msg, req.source, req.program_name, flags, missing=getattr(e, "missing", ()), log=log
    )


def unopened(e: Exception, req: Request, ctx, keyed):
    """NVRTC's "cannot open source file" for includes the resolver left to it as the resolver's
    MissingHeaderCompileError (a moved header's new name and jitify=True's dropped includes
    then answer it); None for any other failure."""
    if not isinstance(e, errors.CompileError) or isinstance(e, MissingHeaderError):
        return None
    log = getattr(e, "log", "") or ""
    met = nvrtclog.unopened_files(log)
    closure = keyed.closure
    if met and closure is None:  # keyed by a manifest: the closure is resolved again
        try:
            closure = request_closure(req)
        except Exception:  # what changed since is NVRTC's error to tell
            return None
    missing = tuple(m for where in met for m in _met(closure, req, where))
    if not missing:
        return None
    dump_path = getattr(e, "dump_path", None)
    text = "\n".join(m.message() for m in missing)
    if dump_path:
        text += f"\nfull source and options written to {dump_path}"
    error = as_compile_error(MissingHeaderError(text, missing), req, ctx, log)
    error.dump_path = dump_path
    return error


def _met(closure, req: Request, where: tuple[str, int, str]) -> list:
    """The closure's records of the include NVRTC could not open at ``where`` (the includer as
    NVRTC names it, the line, the name): the one at that place, else (a place this reading
    cannot match) every include of that name."""
    file, line, name = where
    paths = {h.logical: h.path for h in closure.headers}
    named = [m for m in closure.missing if m.name == name]

    def at(m) -> bool:
        step = m.chain[-1]
        includer = paths.get(step.file)
        same = includer == file if includer is not None else file == req.program_name
        return same and step.line == line

    return [m for m in named if at(m)] or named
