"""Observing OS processes from the fault tests: is a pid still running, and waiting for it to end.

Everything here reads `/proc` (Linux only). A process counts as gone once it has exited, even if
its parent has not reaped it yet: a zombie (state `Z`) runs no code and holds no socket, and an
orphaned zombie may never be reaped in a container whose init does not wait for children. A pid
is compared together with the start time it had when the test first saw it, so a pid reused by
an unrelated process after the original one ended also counts as gone.

Waiting polls with a deadline (`Event().wait(POLL)` between looks): the kernel offers no event a
non-parent can wait on for the exit of an arbitrary process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ProcessRef",
    "kill_all",
    "marked_pids",
    "wait_until_gone",
]

# Pause between two looks at /proc while waiting for processes to end.
POLL = 0.05


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first), or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
    return stat.rsplit(")", 1)[1].split()


@dataclass(frozen=True)
class ProcessRef:
    """A process as the test first saw it: its pid, parent and start time (clock ticks)."""

    pid: int
    ppid: int
    start_time: int

    @classmethod
    def of(cls, pid: int) -> ProcessRef:
        """Read `pid` now; raises `ProcessLookupError` if it is not running."""
        fields = _stat_fields(pid)
        if fields is None or fields[0] in ("Z", "X"):
            raise ProcessLookupError(f"Process {pid} is not running.")
        # Field 4 is the parent pid, field 22 the start time since boot.
        return cls(pid=pid, ppid=int(fields[1]), start_time=int(fields[19]))

    def running(self) -> bool:
        """False once this process exited (zombies included) or its pid belongs to another."""
        fields = _stat_fields(self.pid)
        if fields is None or fields[0] in ("Z", "X"):
            return False
        return int(fields[19]) == self.start_time


def wait_until_gone(refs: Iterable[ProcessRef], timeout: float) -> list[ProcessRef]:
    """Wait up to `timeout` seconds for every process to end; returns those still running."""
    refs = list(refs)
    deadline = time.monotonic() + timeout
    pause = threading.Event()  # never set: a bounded pause between two looks
    while True:
        alive = [ref for ref in refs if ref.running()]
        if not alive or time.monotonic() >= deadline:
            return alive
        pause.wait(POLL)


def marked_pids(variable: str, value: str) -> list[ProcessRef]:
    """Running processes (other than this one) whose environment holds `variable=value`."""
    needle = f"{variable}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:
            continue
        if needle in variables:
            with contextlib.suppress(ProcessLookupError):
                found.append(ProcessRef.of(int(entry)))
    return found


def kill_all(refs: Iterable[ProcessRef]) -> None:
    """SIGKILL each process that is still the one the test saw; used in `finally` blocks."""
    for ref in refs:
        if ref.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(ref.pid, signal.SIGKILL)
