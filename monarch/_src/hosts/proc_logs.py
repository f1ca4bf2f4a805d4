"""Output of the local host agent's procs: forwarding, tails for failure reports, log levels.

A proc sends what it writes as `log` controls (with `enable_log_forwarding`) or `log_tail`
controls (only a tail is kept, `tail_log_lines`). `ProcLogs` keeps the last lines of each proc
(`with_tail` appends them to the proc's failure report), writes forwarded output through a
`LogSink` (the meshes' `log_stream` / `log_window`), and implements the two operations on the
procs' output: a flush barrier and setting their Python log level.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

from monarch._src.config import duration_seconds, get as config_get
from monarch._src.hosts.control_ops import FlushLogs, LogLevel
from monarch._src.mesh.logs import LogSink, TailBuffer
from monarch._src.mesh.proc_mesh import ProcTable
from monarch._src.runtime.control import control
from monarch._src.runtime.ports import CountPort
from monarch._src.runtime.runtime import Runtime

__all__ = ["ProcLogs", "settled"]

logger = logging.getLogger(__name__)


class ProcLogs:
    """The output side of one local host agent."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.sink = LogSink()  # where forwarded output is written
        self.tails = TailBuffer()  # tail_log_lines: the last lines each proc wrote

    def received(self, table: ProcTable, proc_id: str, fd: int, text: str,
                 forwarded: bool) -> None:
        """`text` written by `proc_id` on `fd`: kept for its tail and, when `forwarded`, written
        here if its mesh streams its output."""
        self.tails.add(proc_id, fd, text, table.tail_lines)
        if forwarded and table.log_stream:
            self.sink.write(proc_id, table.mesh_key, fd, text, table.log_window)

    def with_tail(self, table: ProcTable, rank: int, report: str) -> str:
        """`report` with the last `tail_log_lines` lines the proc wrote, if any were kept."""
        proc_id = table.proc_ids[rank] if table.proc_ids else None
        lines = self.tails.take(proc_id) if proc_id is not None else []
        if not lines:
            return report
        prefix = f"[{rank}] " if config_get("prefix_with_rank") else ""
        shown = "\n".join(f"    {prefix}{line}" for line in lines)
        return f"{report}\n  last {len(lines)} lines of its output:\n{shown}"

    async def flush(self, tables: list[ProcTable], stopping: bool = False) -> None:
        """A barrier: returns once every line the procs of `tables` wrote so far was written
        here (bounded by `process_exit_timeout`). Tables being stopped are skipped, unless
        `stopping`: the stop itself flushes its procs before they are told to exit."""
        mailbox = self.rt.mailbox
        waits = []
        for table in tables:
            keys = [k for rank, k in enumerate(table.keys) if table.is_up(rank)]
            if (table.stopped is not None and not stopping) or not keys:
                continue
            entry = CountPort(len(keys))
            port = mailbox.open_port(entry, tuple(keys))
            for key in keys:
                mailbox.post(key, control(FlushLogs(), port))
            waits.append(settled(entry.cf))
        if waits:
            # A proc that died cannot answer (its port fails): what it wrote came already.
            limit = duration_seconds("process_exit_timeout")
            _, late = await asyncio.wait(waits, timeout=limit)
            if late:
                logger.warning("monarch: the procs of %d mesh(es) did not answer a log flush "
                               "within %gs (process_exit_timeout); lines they wrote before it "
                               "may still follow", len(late), limit)
        self.sink.flush_due(force=True)

    def set_level(self, table: ProcTable, level: int) -> concurrent.futures.Future[None]:
        """Set the Python logging level in every live proc of `table`."""
        async def send() -> None:
            keys = [k for rank, k in enumerate(table.keys) if table.is_up(rank)]
            entry = CountPort(len(keys))
            port = self.rt.mailbox.open_port(entry, tuple(keys))
            for key in keys:
                self.rt.mailbox.post(key, control(LogLevel(level), port))
            await asyncio.wrap_future(entry.cf)

        return self.rt.submit(send())


def settled(cf: concurrent.futures.Future[Any]) -> asyncio.Task[None]:
    """A task that ends when `cf` does, whatever its outcome (nobody reads the outcome)."""

    async def wait() -> None:
        try:
            await asyncio.wrap_future(cf)
        except BaseException:
            pass  # only the settling matters here; the outcome's owner reads it from `cf`

    return asyncio.get_running_loop().create_task(wait())
