"""Forwarding the stdout and stderr of procs to the controller.

Without forwarding (scripts, by default) procs inherit the controller's file descriptors and
write straight to its terminal. With `enable_log_forwarding` (set automatically under IPython,
where the kernel's descriptors do not reach the notebook) each proc points its fds 1 and 2 at
pipes; a reader thread per stream sends what arrives to the controller in `log` control
messages, which the controller writes to its own `sys.stdout`/`sys.stderr` (in a notebook: the
output of the running cell). `ProcMesh.logging_option` switches streaming per proc mesh and sets
an aggregation window: within a window, repeated lines are written once, prefixed
"[N similar log lines]". `flush_logs()` is a barrier: every line a proc wrote before it is
delivered when it returns (the notebook runs it after each cell; `ProcMesh.stop` before
stopping).
"""

from __future__ import annotations

import collections
import fcntl
import os
import select
import struct
import sys
import termios
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LogCapture", "LogSink", "TailBuffer", "capture_paths"]

_STREAMS = {1: "stdout", 2: "stderr"}
_YELLOW = "\x1b[33m"
_RESET = "\x1b[0m"


class LogCapture:
    """Proc side: fds 1 and 2 go to pipes whose contents are sent with `send(stream, text)`.

    `passthrough`: also write what arrives to the original fds 1 and 2 (when output is captured
    for a tail or files but not forwarded, it still reaches the terminal). `files`: also append
    it to these files, by fd, each line prefixed with `prefix` (`enable_file_capture`).
    """

    def __init__(
        self,
        send: Callable[[int, str], None] | None,
        *,
        passthrough: bool = False,
        files: dict[int, Any] | None = None,
        prefix: str = "",
    ) -> None:
        self._send = send
        self._readers: list[_PipeReader] = []
        for fd in (1, 2):
            original = os.dup(fd) if passthrough else None
            tee = _LineFile(files[fd], prefix) if files else None
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            reader = _PipeReader(fd, read_end, _fan_out(fd, send, original, tee))
            self._readers.append(reader)
            reader.start()
        # A pipe is not a terminal: without this, print() output would wait for 8 KiB.
        for stream in (sys.stdout, sys.stderr):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(line_buffering=True)

    def drain(self, timeout: float = 5.0) -> None:
        """Return once everything written to fds 1 and 2 so far was handed to `send`."""
        sys.stdout.flush()
        sys.stderr.flush()
        for reader in self._readers:
            reader.drain(timeout)


def _fan_out(
    fd: int, send: Callable[[int, str], None] | None, original: int | None, tee: _LineFile | None
) -> Callable[[int, str], None]:
    def deliver(stream: int, text: str) -> None:
        if original is not None:
            data = text.encode("utf-8", errors="replace")
            while data:
                try:
                    data = data[os.write(original, data):]
                except OSError:
                    break
        if tee is not None:
            tee.write(text)
        if send is not None:
            send(stream, text)

    return deliver


class _LineFile:
    """An append-only file whose lines each start with `prefix`."""

    def __init__(self, handle: Any, prefix: str) -> None:
        self.handle = handle
        self.prefix = prefix
        self.at_line_start = True

    def write(self, text: str) -> None:
        if self.prefix:
            parts = text.split("\n")
            out = []
            for i, part in enumerate(parts):
                if i:
                    out.append("\n")
                    self.at_line_start = True
                if part:
                    if self.at_line_start:
                        out.append(self.prefix)
                    out.append(part)
                    self.at_line_start = False
            text = "".join(out)
        try:
            self.handle.write(text)
            self.handle.flush()
        except (OSError, ValueError):
            pass  # the stream is closed (interpreter exit, a closed pipe): nowhere to report


def capture_paths(proc_id: str) -> dict[int, str]:
    """Where `enable_file_capture` writes proc `proc_id`'s stdout (1) and stderr (2):
    `$MONARCH_LOG_DIR` or `<temp dir>/monarch-<uid>/logs`, files `<proc_id>.stdout`/`.stderr`."""
    import tempfile

    folder = os.environ.get("MONARCH_LOG_DIR") or os.path.join(
        tempfile.gettempdir(), f"monarch-{os.getuid()}", "logs")
    os.makedirs(folder, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in proc_id)
    return {fd: os.path.join(folder, f"{safe}.{_STREAMS[fd]}") for fd in (1, 2)}


class TailBuffer:
    """Controller side (`tail_log_lines`): the last lines each proc wrote, both streams in
    arrival order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: dict[str, collections.deque[str]] = {}
        self._partial: dict[tuple[str, int], str] = {}

    def add(self, proc: str, fd: int, text: str, keep: int) -> None:
        if keep <= 0:
            return
        with self._lock:
            text = self._partial.pop((proc, fd), "") + text
            lines = text.split("\n")
            if lines[-1]:
                self._partial[(proc, fd)] = lines[-1]
            lines = lines[:-1]
            if not lines:
                return
            tail = self._lines.get(proc)
            if tail is None or tail.maxlen != keep:
                tail = self._lines[proc] = collections.deque(tail or (), maxlen=keep)
            tail.extend(lines)

    def take(self, proc: str) -> list[str]:
        """The kept lines of `proc` (an unfinished last line included), forgetting them."""
        with self._lock:
            tail = self._lines.pop(proc, None)
            lines = list(tail or ())
            for key in [k for k in self._partial if k[0] == proc]:
                lines.append(self._partial.pop(key))
            keep = tail.maxlen if tail is not None else None
            return lines[-keep:] if keep else lines


class _PipeReader(threading.Thread):
    def __init__(self, fd: int, read_end: int, send: Callable[[int, str], None]) -> None:
        super().__init__(name=f"monarch-log-{_STREAMS[fd]}", daemon=True)
        self.fd = fd
        self.read_end = read_end
        self.send = send
        self.idle = threading.Condition()
        self.busy = False  # True between reading a chunk and having sent it

    def run(self) -> None:
        while True:
            # Wait until there is something to read, then read it with `busy` set under the
            # lock: `drain` sees either bytes still in the pipe or a busy reader, never a chunk
            # read and not yet counted (which let a flush answer before its last lines).
            try:
                select.select([self.read_end], [], [])
            except (OSError, ValueError):
                return
            with self.idle:
                try:
                    chunk = os.read(self.read_end, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.busy = True
            try:
                self.send(self.fd, chunk.decode("utf-8", errors="replace"))
            finally:
                with self.idle:
                    self.busy = False
                    self.idle.notify_all()

    def pending(self) -> int:
        buf = fcntl.ioctl(self.read_end, termios.FIONREAD, struct.pack("i", 0))
        return int(struct.unpack("i", buf)[0])

    def drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.idle:
            while self.busy or self.pending():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.idle.wait(min(left, 0.01))


class LogSink:
    """Controller side: writes forwarded text to this process's sys.stdout / sys.stderr,
    collapsing repeated lines within each mesh's aggregation window; a window is written when
    it ends (a timer), when a later line finds it ended, or at a flush."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partial: dict[tuple[str, int], str] = {}  # (proc, fd) -> unterminated line
        self._window: dict[tuple[str, int], _Window] = {}  # (mesh, fd) -> lines collected

    def write(self, proc: str, mesh: str, fd: int, text: str, window: float | None) -> None:
        with self._lock:
            text = self._partial.pop((proc, fd), "") + text
            lines = text.split("\n")
            if lines[-1]:
                self._partial[(proc, fd)] = lines[-1]
            complete = [line + "\n" for line in lines[:-1]]
            if not complete:
                return
            if not window:
                _out(fd).write("".join(complete))
                return
            collected = self._window.get((mesh, fd))
            if collected is None:
                collected = self._window[(mesh, fd)] = _Window(time.monotonic() + window)
                # Written when the window ends even if nothing else arrives after it.
                timer = threading.Timer(window, self.flush_due)
                timer.daemon = True
                timer.start()
            collected.add(complete)
        self.flush_due()

    def flush_due(self, force: bool = False) -> None:
        """Write every window that has ended (all of them with `force`)."""
        now = time.monotonic()
        with self._lock:
            due = [k for k, w in self._window.items() if force or w.ends <= now]
            windows = [(k, self._window.pop(k)) for k in due]
            partial = dict(self._partial) if force else {}
            if force:
                self._partial.clear()
        for (_, fd), w in windows:
            _out(fd).write(w.render())
        for (_, fd), text in partial.items():
            _out(fd).write(text + "\n")
        if force or windows:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()


class _Window:
    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.counts: dict[str, int] = {}  # line -> times seen, in first-seen order

    def add(self, lines: list[str]) -> None:
        for line in lines:
            self.counts[line] = self.counts.get(line, 0) + 1

    def render(self) -> str:
        out = []
        for line, n in self.counts.items():
            out.append(f"{_YELLOW}[{n} similar log lines]{_RESET} {line}" if n > 1 else line)
        return "".join(out)


def _out(fd: int) -> Any:
    return sys.stdout if fd == 1 else sys.stderr
