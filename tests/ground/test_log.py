"""The one warn-once (log.py): a key speaks once per process, a test can forget them all."""

from __future__ import annotations

import logging

from cupy_rawcode.ground import log


def test_first_time_is_once_per_key(monkeypatch):
    monkeypatch.setattr(log, "_said", set())
    assert log.first_time(("a", 1)) and not log.first_time(("a", 1))
    assert log.first_time(("a", 2)) and log.said(("a", 1)) and not log.said(("b",))


def test_warn_once_logs_once_and_forget_lets_it_speak_again(monkeypatch, caplog):
    monkeypatch.setattr(log, "_said", set())
    with caplog.at_level(logging.WARNING, logger="cupy_rawcode"):
        log.warn_once(("k",), "cupy-rawcode: %s", "x")
        log.warn_once(("k",), "cupy-rawcode: %s", "y")
        log.forget()
        log.warn_once(("k",), "cupy-rawcode: %s", "z")
    assert [r.getMessage() for r in caplog.records] == ["cupy-rawcode: x", "cupy-rawcode: z"]
