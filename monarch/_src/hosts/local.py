"""The embedded local host: `this_host()` starts procs on this machine through a fork server.

One `LocalHostAgent` per process (the controller, or an actor's proc that spawns procs of its
own) owns one zygote (see `zygote.py`, driven by `zygote_client.py`). The child watch reports
the pid of each new proc and the exit of every child, which fails the proc's rank at once unless
it was asked to stop. Procs report `proc_ready` to the mailbox of the process that asked for
them, which resolves their routing keys. `local_agent()` makes the process's agent on first use
and registers it (`mesh/host_agent.py`); importing this module fills the `local_host` hook slot
behind `this_host()`.

The agent keeps the book of its procs and delegates by concern: `zygote_client.py` (the zygote
and the child watch), `proc_spawn.py` (specs, the spawn watch), `connection_loss.py`,
`proc_logs.py` (output, tails, log levels), `proc_stop.py` and `heartbeat.py` (unresponsive
procs fail like dead ones and are killed).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import socket
import threading
from collections.abc import Callable
from typing import Any

from monarch._src.config import duration_seconds, get as config_get
from monarch._src.hosts.binding import cpus_for_binding
from monarch._src.hosts.bootstrap_command import check_commands, launch_env, program_problem
from monarch._src.hosts.connection_loss import CONFIRM_DELAY, confirm_lost
from monarch._src.hosts.control_ops import Log, LogTail, ProcOutput, ProcReady
from monarch._src.hosts.heartbeat import HeartbeatMonitor
from monarch._src.hosts.prestart import prestart_zygote
from monarch._src.hosts.proc_logs import ProcLogs
from monarch._src.hosts.proc_spawn import proc_spec, watch_spawn
from monarch._src.hosts.proc_stop import STOPPED_REPORT, StopLimits, stop_table
from monarch._src.hosts.zygote_client import ZygoteClient
from monarch._src.mesh import hooks, host_agent
from monarch._src.mesh.host_agent import PlacedTable
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.proc_mesh import ProcTable, report_proc_failure
from monarch._src.runtime.mailbox import pending_key
from monarch._src.runtime.runtime import Runtime, get_runtime
from monarch._src.shape import Shape, Slice
from monarch._src.supervision.errors import SupervisionError

__all__ = ["LocalHostAgent", "local_agent", "proc_exit_report", "set_launched_with", "this_host"]

# How many stopped procs' output is still routed (see LocalHostAgent._stopped_procs).
_STOPPED_PROCS_KEPT = 1024

Where = tuple[ProcTable, int]  # a proc's table and its rank in it


class LocalHostAgent:
    """Starts procs on this machine. Public methods run on any thread but the runtime loop.

    The agent keeps the book of its procs (below) and wires the concerns together, each in its
    own module: the fork server and child watch (`zygote_client.py`), what a proc is told and
    the spawn watch (`proc_spawn.py`), a broken connection (`connection_loss.py`), the procs'
    output (`proc_logs.py`), heartbeats (`heartbeat.py`) and stopping (`proc_stop.py`).
    """

    is_local = True  # paths given for these hosts (with_python_executable) can be checked here

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._lock = threading.Lock()  # guards the book of procs
        self._ids = itertools.count()
        self._pending: dict[str, Where] = {}  # not yet ready: proc id -> where
        self._procs: dict[str, Where] = {}  # every proc id -> (table, rank)
        # Procs stopped lately (bounded): output they wrote before exiting can be read after the
        # stop completed; it still reaches their mesh's stream.
        self._stopped_procs: collections.OrderedDict[str, Where] = collections.OrderedDict()
        self._by_pid: dict[int, Where] = {}  # pid -> (table, rank)
        self._exited: dict[int, concurrent.futures.Future[str]] = {}  # pid -> exit status
        self._tables: list[ProcTable] = []  # tables not yet stopped
        self._by_addr: dict[str, int] = {}  # address -> pid, for procs that are up
        self._closed = False
        self.zygote = ZygoteClient(self._spawned, self._child_exited)
        self.logs = ProcLogs(rt)
        self._heartbeats: HeartbeatMonitor[Where] = HeartbeatMonitor(
            rt, interval="heartbeat_interval", timeout="heartbeat_timeout",
            targets=self._live_procs, on_silent=self._unresponsive,
            running=lambda: not self._closed)
        rt.mailbox.control.register(ProcReady, self._proc_ready)
        rt.mailbox.control.register(Log, self._log)
        rt.mailbox.control.register(LogTail, self._log_tail)
        rt.mailbox.lost_delegate.install(self._connection_lost)
        rt.shutdown_hooks.add(self.close)

    # ---- the child watch (zygote_client.py's thread) ------------------------------------------
    def _spawned(self, proc_id: str, pid: int) -> None:
        with self._lock:
            where = self._procs.get(proc_id)
            if where is not None:
                self._by_pid[pid] = where
                where[0].pids[where[1]] = pid
            self._exited.setdefault(pid, concurrent.futures.Future())

    def _child_exited(self, pid: int, status: str) -> None:
        with self._lock:
            fut = self._exited.setdefault(pid, concurrent.futures.Future())
        if not fut.done():
            fut.set_result(status)
        self.rt.call_soon(self._proc_exited, pid, status)

    def _kill(self, pids: list[int]) -> None:
        self.zygote.kill(pids)

    # ---- spawning ---------------------------------------------------------------------------
    def spawn_procs(
        self,
        hosts: list[int],
        per_host: int,
        bootstrap: Callable[[], Any] | None,
        *,
        proc_ids: list[str] | None = None,
        spec: dict[str, Any] | None = None,
        python: str | None = None,
        proc_bind: list[dict[str, str]] | None = None,
        commands: list[Any] | None = None,
    ) -> ProcTable:
        """Fork `len(hosts) * per_host` procs. A served remote host (`hosts/served.py`) passes
        the ids its client chose and `spec` entries (root, listen address, config) to override.
        `proc_bind`: the binding of each proc of a host, by rank on the host (`binding.py`).
        `commands`: each proc's bootstrap command (`bootstrap_command.py`), which the forked
        child execs; a proc whose program this host cannot run fails at once, saying why."""
        cpu_binds = ([cpus_for_binding(b, r) for r, b in enumerate(proc_bind)]
                     if proc_bind is not None else None)
        n = len(hosts) * per_host
        records = (check_commands(commands, n, "HostMesh.spawn_procs")
                   if commands is not None else None)
        if proc_ids is None:
            proc_ids = [f"{self.rt.proc_id}.{next(self._ids)}" for _ in range(n)]
        table = ProcTable([pending_key(p) for p in proc_ids])
        table.proc_ids = list(proc_ids)
        table.has_bootstrap = bootstrap is not None
        table.tail_lines = int((spec or {}).get("tail_log_lines", config_get("tail_log_lines")))
        common = proc_spec(self.rt, bootstrap, python, spec)
        with self._lock:
            if self._closed:
                raise RuntimeError("The local host agent was shut down; no procs can be started.")
            for rank, proc_id in enumerate(proc_ids):
                self._pending[proc_id] = self._procs[proc_id] = (table, rank)
            self._tables.append(table)
        specs = [{**common, "proc_id": p, "rank": rank,
                  **({"cpus": cpu_binds[rank % per_host]} if cpu_binds else {})}
                 for rank, p in enumerate(proc_ids)]
        refused: list[tuple[int, str]] = []
        if records is not None:
            for rank, record in enumerate(records):
                env = launch_env(record, common["env"])
                problem = program_problem(record, env)
                if problem is not None:
                    refused.append((rank, f"proc {proc_ids[rank]} failed to spawn: {problem}"))
                specs[rank].update(command=record, env=env)
            if refused:
                with self._lock:
                    for rank, _ in refused:
                        self._pending.pop(proc_ids[rank], None)
                skipped = {rank for rank, _ in refused}
                specs = [s for rank, s in enumerate(specs) if rank not in skipped]
                for rank, report in refused:
                    self.rt.call_soon(self._refuse, table, rank, report)
        if specs:
            self.zygote.spawn(specs)
        self.rt.call_soon(self._heartbeats.start)
        # Read now: the setting in force when the procs were asked for applies.
        idle = duration_seconds("mesh_proc_spawn_max_idle")
        self.rt.call_soon(lambda: watch_spawn(
            self.rt, table, idle, closed=lambda: self._closed,
            give_up=lambda rank, report: self._give_up(table, rank, report)))
        return table

    def _refuse(self, table: ProcTable, rank: int, error: str) -> None:
        """A proc that could not be started (its bootstrap command cannot run here): its rank
        fails as a proc whose bootstrap raised does, `initialized` raising `error` (loop)."""
        table.fail(rank, error)
        self.rt.mailbox.mark_dead(pending_key(table.proc_ids[rank]), SupervisionError(error))

    def _give_up(self, table: ProcTable, rank: int, report: str) -> None:
        """A proc that did not come up in time: killed, its rank failed (loop)."""
        with self._lock:
            self._pending.pop(table.proc_ids[rank], None)
        pid = table.pids[rank]
        if pid is not None:
            self._kill([pid])
        self._proc_failed(table, rank, report)

    def _proc_ready(self, peer: str, ready: ProcReady, reply: Any) -> None:
        proc_id, addr, pid, error = ready.proc_id, ready.address, ready.pid, ready.error
        with self._lock:
            where = self._pending.pop(proc_id, None)
            if where is not None:
                # Watched from here on, whichever of this and the zygote's "spawned" comes first.
                self._by_pid[pid] = where
                self._exited.setdefault(pid, concurrent.futures.Future())
        if where is None:
            return
        table, rank = where
        key = pending_key(proc_id)
        if error is not None:
            if ready.setup_error is not None:
                table.setup_errors[rank] = ready.setup_error  # what Monarch's setup actor raises
            table.fail(rank, error)
            self.rt.mailbox.mark_dead(key, SupervisionError(error))
            return
        table.resolve(rank, addr, pid)
        with self._lock:
            self._by_addr[addr] = pid
        self.rt.mailbox.resolve(key, addr)

    # ---- failures ---------------------------------------------------------------------------
    def _connection_lost(self, addr: str, err: BaseException) -> bool:
        """A proc's connection broke: let the child watch say why, if it is our child (loop)."""
        with self._lock:
            pid = self._by_addr.get(addr)
            watched = pid is not None and pid in self._by_pid
        if not watched:
            return False
        assert pid is not None
        self.rt.loop.call_later(CONFIRM_DELAY, confirm_lost, self.rt, addr, err, pid)
        return True

    def _proc_exited(self, pid: int, status: str) -> None:
        """The child watch saw `pid` end (runtime loop)."""
        with self._lock:
            where = self._by_pid.pop(pid, None)
        if where is None:
            return
        table, rank = where
        key = table.keys[rank]
        if not table.is_up(rank):
            self._pending_exited(table, rank, key, status)
            return
        with self._lock:
            if self._by_addr.get(key) != pid:
                return  # a newer proc already listens on this (reused) port
            del self._by_addr[key]
        self._heartbeats.forget(key)
        if table.stopped is not None:
            self.rt.mailbox.mark_dead(key, SupervisionError(STOPPED_REPORT))
        elif rank not in table.failed:  # (a proc killed for missing heartbeats already was)
            self._proc_failed(table, rank, self.logs.with_tail(
                table, rank, proc_exit_report(status)))

    def _pending_exited(self, table: ProcTable, rank: int, key: str, status: str) -> None:
        """A proc ended before it reported ready (its bootstrap exited or was killed, its
        interpreter could not start monarch): its rank fails now, with the exit status, and
        whatever waits on it (held spawns and calls, `initialized`, a stop) resolves (loop)."""
        with self._lock:
            self._pending.pop(table.proc_ids[rank], None)
        if table.stopped is not None:
            self.rt.mailbox.mark_dead(key, SupervisionError(STOPPED_REPORT))
        elif rank not in table.failed:  # (a bootstrap that raised already failed it)
            self._proc_failed(table, rank, self.logs.with_tail(
                table, rank, proc_exit_report(status)))

    def _proc_failed(self, table: ProcTable, rank: int, report: str) -> None:
        """Rank `rank` of `table` failed (a served host forwards this instead)."""
        report_proc_failure(self.rt, table, rank, report)

    # ---- heartbeats (heartbeat.py) -------------------------------------------------------------
    def _live_procs(self) -> list[tuple[str, Where]]:
        """The procs to ping: up, not failed, of a table not stopped (loop)."""
        with self._lock:
            tables = list(self._tables)
        return [(key, (table, rank)) for table in tables if table.stopped is None
                for rank, key in enumerate(table.keys)
                if table.is_up(rank) and rank not in table.failed]

    def _unresponsive(self, key: str, where: Where, silence: float, timeout: float) -> None:
        """A proc that has not answered for `heartbeat_timeout` is hung (stopped, deadlocked,
        swapped out): it fails and is killed (loop)."""
        table, rank = where
        pid = table.pids[rank]
        self._proc_failed(
            table, rank,
            f"the process this actor was running on is unresponsive: no heartbeat for "
            f"{silence:.1f}s (heartbeat_timeout {timeout:g}s)",
        )
        if pid is not None:
            self._kill([pid])

    # ---- output (proc_logs.py) --------------------------------------------------------------
    def _log(self, peer: str, out: ProcOutput, reply: Any) -> None:
        """Output a proc forwards (`enable_log_forwarding`)."""
        where = self._output_of(out.proc_id)
        if where is not None:
            self.logs.received(where[0], out.proc_id, out.fd, out.text, forwarded=True)

    def _log_tail(self, peer: str, out: ProcOutput, reply: Any) -> None:
        """Output of a proc that is not forwarded, kept for its failure report only."""
        where = self._output_of(out.proc_id)
        if where is not None:
            self.logs.received(where[0], out.proc_id, out.fd, out.text, forwarded=False)

    def _output_of(self, proc_id: str) -> Where | None:
        """Where output of `proc_id` goes: a live proc's table, or a lately stopped one's."""
        with self._lock:
            return self._procs.get(proc_id) or self._stopped_procs.get(proc_id)

    def flush_logs(self, tables: list[ProcTable] | None = None) -> concurrent.futures.Future[None]:
        """A barrier: returns once every line the procs wrote so far was written here."""
        if tables is None:
            with self._lock:
                tables = list(self._tables)
        return self.rt.submit(self.logs.flush(tables))

    def set_log_level(self, table: ProcTable, level: int) -> concurrent.futures.Future[None]:
        """Set the Python logging level in every live proc of `table`."""
        return self.logs.set_level(table, level)

    # ---- queries ----------------------------------------------------------------------------
    def connected(self) -> concurrent.futures.Future[None]:
        """This machine is always reachable: a completed future."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done

    def snapshot(self) -> list[PlacedTable]:
        """The proc tables not yet stopped, every rank on this machine (any thread)."""
        here = socket.gethostname()
        with self._lock:
            tables = list(self._tables)
        return [PlacedTable(t, (here,) * len(t.keys)) for t in tables]

    def live_addresses(self) -> list[str]:
        """The addresses of the procs that are up (any thread)."""
        with self._lock:
            return list(self._by_addr)

    # ---- stopping (proc_stop.py) ------------------------------------------------------------
    def stop_procs(self, table: ProcTable, reason: str) -> concurrent.futures.Future[None]:
        """Stop the procs of `table` (bounded, see `proc_stop.py`); stopped is not failed."""
        table.begin_stop(reason)
        # Read now: the settings in force when the stop was asked for apply.
        stop = self.rt.submit(self._stop(table, reason, StopLimits.now()))
        return table.forget_when_stopped(stop)

    async def _stop(self, table: ProcTable, reason: str, limits: StopLimits) -> None:
        if config_get("enable_log_forwarding"):
            # What the procs printed comes out before they go (`begin_stop` marked the table).
            await self.logs.flush([table], stopping=True)
        await stop_table(self.rt, table, reason, limits, kill=self._kill, exit_of=self._exit_of)
        with self._lock:
            if table in self._tables:
                self._tables.remove(table)
        mailbox = self.rt.mailbox
        for rank, key in enumerate(table.keys):
            with self._lock:
                reused = self._by_addr.get(key) not in (None, table.pids[rank])
            if not reused:  # else a newer proc of another table listens on that port now
                mailbox.mark_dead(key, SupervisionError(STOPPED_REPORT))
        with self._lock:  # the procs are gone: forget their tables
            for proc_id in table.proc_ids:
                where = self._procs.pop(proc_id, None)
                if where is not None:
                    self._stopped_procs[proc_id] = where
            while len(self._stopped_procs) > _STOPPED_PROCS_KEPT:
                self._stopped_procs.popitem(last=False)

    def _exit_of(self, pid: int) -> concurrent.futures.Future[str] | None:
        with self._lock:
            return self._exited.get(pid)

    def stop_all(self) -> concurrent.futures.Future[None]:
        """Stop every proc of this agent; it can start procs again afterwards."""
        with self._lock:
            tables = list(self._tables)
        futures = [self.stop_procs(t, "host mesh shut down") for t in tables]

        async def all_done() -> None:
            if futures:
                await asyncio.wait([asyncio.wrap_future(f) for f in futures])

        return self.rt.submit(all_done())

    def shutdown(self) -> concurrent.futures.Future[None]:
        """`HostMesh.shutdown` of `this_host()`: stops every proc (`stop_all`); the process's
        agent stays, so a later `this_host()` starts procs again."""
        return self.stop_all()

    def close(self, timeout: float = 5.0) -> None:
        """Stop every proc, then the zygote (at exit: bounded by `timeout`)."""
        host_agent.forget(self)
        if not self.zygote.started or self._closed:
            return
        try:
            self.shutdown().result(timeout=timeout)
        except Exception:  # at exit, the zygote's stdin watch kills whatever is left
            pass
        with self._lock:
            self._closed = True
        self._heartbeats.cancel()
        self.zygote.close(timeout)


_agent: LocalHostAgent | None = None
_agent_lock = threading.Lock()


def local_agent() -> LocalHostAgent:
    global _agent
    if _agent is None:
        with _agent_lock:
            if _agent is None:
                # First use of this machine's host: the zygote imports the proc runtime while
                # this process starts its runtime, so the first spawn_procs only forks.
                prestart_zygote()
                _agent = LocalHostAgent(get_runtime())
                host_agent.register(_agent)
    return _agent


# In a proc started by `with_python_executable(path)`: that path, which this_host() keeps.
launched_with: str | None = None


def set_launched_with(python: str | None) -> None:
    """Record the interpreter this proc was started with (`exec_proc`): the procs it starts with
    this_host() run it too. None: `sys.executable`."""
    global launched_with
    launched_with = python


def this_host() -> HostMesh:
    """The host mesh (no dimensions) of this machine; `spawn_procs` forks real OS processes (in
    a proc started with another interpreter, that interpreter runs them too)."""
    # As on torchmonarch, this machine's own host mesh takes no workspace (sync_workspace is
    # for the hosts a job allocated or attached): its procs already see this machine's files.
    hm = HostMesh.from_agent(local_agent(), Shape([], Slice(offset=0, sizes=[], strides=[])),
                             True, workspace=False)
    return hm if launched_with is None else hm.with_python_executable(launched_with)


hooks.local_host.install(local_agent)


def proc_exit_report(status: str) -> str:
    """Monarch's words for a proc that ended on its own: "exited with non-zero code 3" for an
    exit status, "failed: Killed(sig=9)" for a signal."""
    if status.startswith("Exited(") and status.endswith(")"):
        return f"the process this actor was running on exited with non-zero code {status[7:-1]}"
    return f"the process this actor was running on failed: {status}"
