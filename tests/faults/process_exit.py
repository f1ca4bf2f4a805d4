"""Observing OS processes from the fault tests: is a pid still running, and waiting for it to end.

Everything here reads `/proc` (Linux only) through `monarch._src.procstat`, whose rule it
keeps: a process counts as gone once it has exited, even if its parent has not reaped it yet (a
zombie runs no code and holds no socket). A pid is compared together with the start time it had
when the test first saw it, so a pid reused by an unrelated process after the original one ended
also counts as gone.

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

from monarch._src.procstat import process_state

__all__ = [
    "ProcessRef",
    "kill_all",
    "marked_pids",
    "wait_until_gone",
]

# Pause between two looks at /proc while waiting for processes to end.
POLL = 0.05


@dataclass(frozen=True)
class ProcessRef:
    """A process as the test first saw it: its pid, parent and start time (clock ticks)."""

    pid: int
    ppid: int
    start_time: int

    @classmethod
    def of(cls, pid: int) -> ProcessRef:
        """Read `pid` now; raises `ProcessLookupError` if it is not running."""
        stat = process_state(pid)
        if stat is None or not stat.alive:
            raise ProcessLookupError(f"Process {pid} is not running.")
        return cls(pid=pid, ppid=stat.ppid, start_time=stat.start_ticks)

    def running(self) -> bool:
        """False once this process exited (zombies included) or its pid belongs to another."""
        stat = process_state(self.pid)
        return stat is not None and stat.alive and stat.start_ticks == self.start_time


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
