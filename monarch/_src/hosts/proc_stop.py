"""Stopping the procs of one proc table of the local host agent.

Each proc is asked to stop (`stop_proc`: its actors stop, their `__cleanup__` runs) and given
`proc_stop_max_idle` to answer, then `mesh_terminate_timeout` to exit before it is killed (and
as long again to be reaped); at most `mesh_terminate_concurrency` procs are stopped at a time. A
proc that never came up has nothing to answer: it is killed. The settings are read when the stop
is asked for (`StopLimits.now()`), so the ones in force then apply.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import NamedTuple

from monarch._src.config import duration_seconds, get as config_get
from monarch._src.hosts.control_ops import StopProc
from monarch._src.hosts.proc_logs import settled
from monarch._src.mesh.proc_mesh import ProcTable
from monarch._src.runtime.control import control
from monarch._src.runtime.ports import OncePort
from monarch._src.runtime.runtime import Runtime
from monarch._src.supervision.errors import SupervisionError

__all__ = ["STOPPED_REPORT", "StopLimits", "stop_table"]

# What a call to a stopped proc's actors raises.
STOPPED_REPORT = "actor mesh is stopped due to proc mesh shutdown"


class StopLimits(NamedTuple):
    answer: float  # proc_stop_max_idle
    exit: float  # mesh_terminate_timeout
    concurrency: int  # mesh_terminate_concurrency

    @classmethod
    def now(cls) -> StopLimits:
        """The limits the configuration sets now."""
        return cls(duration_seconds("proc_stop_max_idle"),
                   duration_seconds("mesh_terminate_timeout"),
                   max(1, int(config_get("mesh_terminate_concurrency"))))


async def stop_table(
    rt: Runtime, table: ProcTable, reason: str, limits: StopLimits, *,
    kill: Callable[[list[int]], None],
    exit_of: Callable[[int], concurrent.futures.Future[str] | None],
) -> None:
    """Stop every proc of `table` (runtime loop). `kill(pids)` kills procs; `exit_of(pid)` is
    the child watch's future of that proc's exit status (None if it is not watched)."""
    limit = asyncio.Semaphore(limits.concurrency)

    async def stop_one(rank: int) -> None:
        mailbox = rt.mailbox
        async with limit:
            key = table.keys[rank]
            if not table.is_up(rank):
                # Never came up (its bootstrap failed, say) or not yet: nothing to ask; kill it.
                pid = table.pids[rank]
                if pid is not None:
                    kill([pid])
            else:
                mailbox.expect_exit(key, SupervisionError(STOPPED_REPORT))
                entry = OncePort()
                port = mailbox.open_port(entry, (key,))
                mailbox.post(key, control(StopProc(reason), port))
                await asyncio.wait([settled(entry.cf)], timeout=limits.answer)
            pid = table.pids[rank]
            exited = exit_of(pid) if pid is not None else None
            if exited is None:
                return
            done, _ = await asyncio.wait([settled(exited)], timeout=limits.exit)
            if not done and pid is not None:
                kill([pid])
                await asyncio.wait([settled(exited)], timeout=limits.exit)

    await asyncio.gather(*(stop_one(rank) for rank in range(len(table.keys))))
