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

_TARGET = "cupy.cuda.compiler"
_started = False


def start() -> None:
    """Take CUPY_RAWCODE_RECORD and CUPY_RAWCODE_INSTALL into effect for this process (once)."""
    global _started
    if _started:
        return
    _started = True
    from . import config, recording

    config.install_scope()  # a bad value fails here, naming the variable
    path = config.record_path()
    if path:
        recording.start(path)
    if _TARGET in sys.modules:
        _apply()
    else:
        sys.meta_path.insert(0, _Finder())


def _apply() -> None:
    """Wrap CuPy's compile function as the variables ask (CuPy is imported)."""
    from . import config, hook, recording

    scope = config.install_scope()
    if scope:
        hook.install(scope)
    if recording.recording():
        hook.observe()


class _Finder:
    """Finds nothing itself: when ``cupy.cuda.compiler`` is imported, it lets the other finders
    find it and runs _apply once the module has been executed."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            _apply()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
