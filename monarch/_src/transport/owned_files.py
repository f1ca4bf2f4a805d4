"""Files that belong to one process, named so that whoever outlives it can remove them.

A proc ends with `os._exit` or a SIGKILL, which run no cleanup, so the files it made (its unix
socket, its RDMA shared-memory segment) would outlive it. Each such file is named
`<prefix><pid>-<start>-<random><suffix>`, where `<start>` is the process's start time (field 22
of /proc/<pid>/stat, clock ticks since boot): a file whose pid is gone, is not alive in the sense
of `monarch._src.procstat` (a zombie), or now belongs to a process that started at another time
(the pid was reused), is an orphan. `sweep` removes the orphans of a folder; it runs where a
process is known to have ended (the zygote reaping a proc, or noticing the controller is gone) and
when a process makes such a file of its own, which covers a whole host that was killed.
"""

from __future__ import annotations

import functools
import os
import secrets
import tempfile
from collections.abc import Iterable

from monarch._src.procstat import process_start_time, process_state

__all__ = ["SHM_DIR", "SHM_PREFIX", "owned_name", "process_start_time", "socket_dir", "sweep",
           "sweep_ended"]

SHM_DIR = "/dev/shm"
SHM_PREFIX = "monarch-"  # /dev/shm/monarch-<pid>-<start>-<random><suffix>


def _runs(pid: int, start: int) -> bool:
    """Process `pid`, started at `start`, still runs (it is not gone, reused or a zombie)."""
    stat = process_state(pid)
    return stat is not None and stat.alive and stat.start_ticks == start


@functools.cache
def _own_tag(pid: int) -> str:
    return f"{pid}-{process_start_time(pid) or 0}"


def owned_name(prefix: str, suffix: str = "") -> str:
    """A fresh file name owned by this process: `<prefix><pid>-<start>-<random><suffix>`."""
    return f"{prefix}{_own_tag(os.getpid())}-{secrets.token_hex(4)}{suffix}"


def _owner(name: str, prefix: str) -> tuple[int, int] | None:
    """(pid, start time) encoded in `name`, or None if it is not such a name."""
    if not name.startswith(prefix):
        return None
    pid, _, rest = name[len(prefix):].partition("-")
    start, _, _ = rest.partition("-")
    if not (pid.isdigit() and start.isdigit()):
        return None
    return int(pid), int(start)


def sweep(directory: str, prefix: str, pids: Iterable[int] | None = None) -> int:
    """Remove the files of `directory` named by `owned_name(prefix, ...)` whose process is gone
    (only those of `pids`, when given); how many were removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0  # no such folder: nothing was made there
    only = None if pids is None else set(pids)
    removed = 0
    for name in names:
        owner = _owner(name, prefix)
        if owner is None or (only is not None and owner[0] not in only):
            continue
        if _runs(*owner):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed += 1
        except OSError:
            pass  # another process removed it first
    return removed


def socket_dir() -> str:
    """This user's folder of unix socket files (`unix://` addresses): `<pid>-<start>-...sock`."""
    return os.path.join(tempfile.gettempdir(), f"monarch-{os.getuid()}")


def sweep_ended(pids: Iterable[int] | None = None) -> int:
    """`sweep` every folder where monarch makes such files (/dev/shm, the socket folder)."""
    pids = None if pids is None else list(pids)
    return sweep(SHM_DIR, SHM_PREFIX, pids) + sweep(socket_dir(), "", pids)
