"""A text progress line shown while a job comes up.

On a terminal the line is rewritten in place (`\\r`); elsewhere (a pipe, a log file, a notebook
cell) only the first and the last state are written, one line each, so logs stay readable. In a
notebook, `monarch.notebook.spawn_progress(proc_mesh)` shows procs coming up once the job's hosts
are there.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Reports `done/total` for one step of bringing a job up, e.g. "hosts ready 1/2"."""

    def __init__(self, title: str, total: int, stream: TextIO | None = None) -> None:
        self._title = title
        self._total = total
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._last: tuple[int, str] | None = None  # last (done, detail) written
        self._closed = False

    def update(self, done: int, detail: str = "") -> None:
        """Record that `done` of `total` items are ready; writes only when that changed."""
        if self._closed or self._last == (done, detail):
            return
        first = self._last is None
        self._last = (done, detail)
        if self._tty:
            self._stream.write("\r" + self._line(done, detail) + "\x1b[K")
            self._stream.flush()
        elif first:
            self._stream.write(self._line(done, detail) + "\n")
            self._stream.flush()

    def close(self, detail: str = "ready") -> None:
        """Write the final state and end the line; later updates are ignored."""
        if self._closed:
            return
        self._closed = True
        line = self._line(self._total, f"{detail} in {time.monotonic() - self._start:.1f}s")
        self._stream.write(("\r" + line + "\x1b[K\n") if self._tty else line + "\n")
        self._stream.flush()

    def _line(self, done: int, detail: str) -> str:
        tail = f" {detail}" if detail else ""
        return f"[monarch] {self._title}: {done}/{self._total}{tail}"
