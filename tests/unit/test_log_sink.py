"""The controller's sink of forwarded proc output (`mesh/logs.LogSink`): an aggregation window
is written when it ends, even when no later line arrives to notice that it has."""

from __future__ import annotations

import threading

import pytest

from monarch._src.mesh.logs import LogSink

pytestmark = pytest.mark.timeout(30)


class _Stream:
    def __init__(self) -> None:
        self.text = ""
        self.written = threading.Event()

    def write(self, text: str) -> None:
        self.text += text
        self.written.set()

    def flush(self) -> None:
        pass


def test_window_is_written_when_it_ends_without_a_later_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, err = _Stream(), _Stream()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    sink = LogSink()
    sink.write("proc0", "mesh", 1, "same\nsame\n", 0.2)
    sink.write("proc1", "mesh", 1, "same\n", 0.2)
    assert out.text == ""  # held for the window
    assert out.written.wait(10)
    assert out.text == "\x1b[33m[3 similar log lines]\x1b[0m same\n"
    assert err.text == ""


def test_no_window_writes_lines_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _Stream()
    monkeypatch.setattr("sys.stdout", out)
    LogSink().write("proc0", "mesh", 1, "a\nb", None)
    assert out.text == "a\n"  # the unterminated "b" waits for its end of line
