"""A deferred module (ground.deferred) read while another thread is still importing it: the
reader waits for the import, never sees the module half made (a first compile's speculative
thread and the caller import the compiler's modules at the same time)."""

import sys
import threading

from cupy_rawcode.ground import deferred

SLOW = """
import time
STARTED.set()
time.sleep(0.3)
def wanted():
    return 42
"""


def test_a_module_another_thread_is_importing_is_waited_for(tmp_path, monkeypatch):
    name = "rawcode_slow_module_for_test"
    (tmp_path / f"{name}.py").write_text(SLOW)
    monkeypatch.syspath_prepend(str(tmp_path))
    started = threading.Event()
    import builtins

    monkeypatch.setattr(builtins, "STARTED", started, raising=False)
    importer = threading.Thread(target=__import__, args=(name,))
    importer.start()
    try:
        assert started.wait(10)  # the module's body runs: it is in sys.modules, half made
        assert name in sys.modules and not hasattr(sys.modules[name], "wanted")
        assert deferred(name).wanted() == 42
    finally:
        importer.join()
        sys.modules.pop(name, None)
