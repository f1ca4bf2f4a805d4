"""What a starting proc reports to the process that spawned it (the `proc_ready` control, and
`remote_proc_ready` when a host server forwards it to its client)."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ProcReady"]


class ProcReady(NamedTuple):
    """The arguments of `proc_ready` / `remote_proc_ready`, sent as a plain tuple
    (`tuple(ProcReady(...))`) and read back with `ProcReady(*args)`."""

    proc_id: str
    address: str  # where the proc listens ("" when it did not start)
    pid: int  # 0 when no process was started
    error: str | None = None  # None: the proc is up; else why it failed to start
    setup_error: Any = None  # the encoded exception Monarch's setup actor raises (bootstrap)
