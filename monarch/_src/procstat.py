"""What the kernel says about one process right now: `process_state(pid)` reads /proc/<pid>/stat.

Every place that asks "does this pid still run?" (job workers, a proc whose connection broke, the
owner of a socket or shared-memory file, the fault tests) reads it here, so they share one rule:
a process is *alive* when it exists and its state is neither zombie (`Z`, exited, not reaped yet)
nor dead (`X`, or `x` on kernels 2.6.33 to 3.13: being torn down). A zombie runs no code and holds
no socket, and an orphaned one may never be reaped in a container whose init does not wait for
children, so it counts as ended. A pid can be reused after its process ended: callers that must
tell the two apart compare `start_ticks` with the value they saw first.

Linux only; where there is no /proc every pid reads as absent (None).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ProcessState", "process_alive", "process_start_time", "process_state"]

# States of a process that has exited: zombie, dead (and the old lowercase spelling of dead).
_ENDED = frozenset("ZXx")


@dataclass(frozen=True)
class ProcessState:
    """One reading of /proc/<pid>/stat (fields 3, 4 and 22 of proc(5))."""

    pid: int
    state: str  # one letter: R running, S sleeping, D disk wait, T stopped, Z zombie, X dead, ...
    ppid: int  # the parent's pid (1 or a subreaper once the parent is gone)
    start_ticks: int  # start time in clock ticks since boot: with `pid`, names one process

    @property
    def alive(self) -> bool:
        """The process exists and has not exited (not a zombie, not dead)."""
        return self.state not in _ENDED


def process_state(pid: int) -> ProcessState | None:
    """The current state of process `pid`; None if there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or ')': the fields
    # we read come after its last ')'. Index 0 below is field 3.
    rest = data[data.rfind(b")") + 1:].split()
    try:
        return ProcessState(pid=pid, state=rest[0].decode(), ppid=int(rest[1]),
                            start_ticks=int(rest[19]))
    except (IndexError, ValueError, UnicodeDecodeError):
        return None  # torn read of a process being reaped: as good as gone


def process_start_time(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot; None if there is no such pid."""
    stat = process_state(pid)
    return None if stat is None else stat.start_ticks


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists and is alive (`ProcessState.alive`: not a zombie, not dead)."""
    stat = process_state(pid)
    return stat is not None and stat.alive
