"""``CUPY_RAWCODE_INSTALL`` and ``CUPY_RAWCODE_RECORD`` in a program that never calls install() or
record().

The package installs ``cupy_rawcode.pth`` into site-packages: one line that Python's ``site``
module runs at the start of every interpreter, importing cupy_rawcode only when either variable
is set (an environment lookup otherwise). ``start()`` then begins the record and, since CuPy's
compile function can only be wrapped once CuPy is imported, puts a finder on ``sys.meta_path``
that wraps it right after ``cupy.cuda.compiler`` is first imported: a process that never imports
CuPy never pays for it, and one that has imported it already is wrapped at once.

Why a ``.pth`` file rather than ``python -m cupy_rawcode run app.py``: it reaches every Python
process the variable reaches (pytest, gunicorn or multiprocessing workers, scripts started by
other tools) without changing how any of them is started.
"""

from __future__ import annotations

import sys

from .ground import config, deferred

# imported by start()'s first use, inside _unfailing: an import that fails (no fcntl, say) is
# then one line on stderr, as any other failure of the hook
recording = deferred("cupy_rawcode.hook.recording")
hook = deferred("cupy_rawcode.hook.install")  # once CuPy is imported

_TARGET = "cupy.cuda.compiler"
_started = False


def start() -> None:
    """Take CUPY_RAWCODE_RECORD and CUPY_RAWCODE_INSTALL into effect for this process (once).
    Never raises: the ``.pth`` line runs at the start of every Python process of the
    environment, so a bad variable is one line on stderr and the process goes on without the
    hook."""
    global _started
    if _started:
        return
    _started = True
    _unfailing(_start)


def _start() -> None:
    config.install_scope()  # a bad value of any variable fails here, naming it
    path = config.record_path()
    if path:
        recording.start(path, "CUPY_RAWCODE_RECORD")
    if _TARGET in sys.modules:
        _apply()
    else:
        sys.meta_path.insert(0, _Finder())


def _apply() -> None:
    """Wrap CuPy's compile function as the variables ask (CuPy is imported)."""
    scope = config.install_scope()
    if scope:
        hook.install(scope)
    if recording.recording():
        hook.observe()


def _unfailing(step) -> None:
    """Run ``step``; an exception becomes one line on stderr (hook_failure), never a traceback."""
    try:
        step()
    except Exception as e:
        sys.stderr.write(hook_failure(e) + "\n")


def hook_failure(e: BaseException) -> str:
    """The one line that says why the hook is off: the error (config's names the variable and
    its value) with its lines joined."""
    why = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())
    if not isinstance(e, ValueError):
        why = f"{type(e).__name__}: {why}" if why else type(e).__name__
    return (
        f"cupy-rawcode: {why} (the CUPY_RAWCODE_INSTALL/CUPY_RAWCODE_RECORD hook is off in "
        "this process)"
    )


class _Finder:
    """Finds nothing itself: when ``cupy.cuda.compiler`` is imported, it lets the other finders
    find it and runs _apply once the module has been executed."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        import importlib.util  # only when CuPy's compiler module is imported

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            _unfailing(_apply)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
