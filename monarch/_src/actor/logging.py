"""torchmonarch's `monarch._src.actor.logging`: flushing the procs' forwarded output.

`flush_all_proc_mesh_logs()` flushes every live host agent's proc logs (what `HostMesh`'s own
flush does, for all of them). `_pending_flush_tasks` is the set of asyncio tasks Monarch's
flushes run as; here flushes are futures on the runtime loop, so it stays empty, and awaiting
what it holds (as Monarch's tests do) is a no-op. Monarch's `LoggingManager` (a per-mesh log
client) has no counterpart: each host agent owns its procs' logs (`hosts/proc_logs.py`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from monarch._src.mesh.host_agent import agents

__all__ = ["LoggingManager", "flush_all_proc_mesh_logs"]

_pending_flush_tasks: set[asyncio.Task[None]] = set()


def flush_all_proc_mesh_logs(timeout: float = 30.0) -> None:
    """Flush the forwarded stdout/stderr of every proc of every live host agent."""
    for agent in agents():
        agent.flush_logs().result(timeout)


class LoggingManager:
    """Monarch's per-proc-mesh log client; has no counterpart here (see the module note)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "LoggingManager does not exist here: each host agent forwards its procs' output. "
            "Use proc_mesh.logging_option(...) to configure it and "
            "flush_all_proc_mesh_logs() to flush it."
        )
