"""The embedded local host: `this_host()` starts procs on this machine through a fork server.

One `LocalHostAgent` per process (the controller, or an actor's proc that spawns procs of its
own) owns one zygote (see `zygote.py`). A reader thread follows the zygote's replies: the pids of
new procs and the exit of every child (the child watch), which fails the proc's rank at once
unless it was asked to stop. Procs report `proc_ready` to the mailbox of the process that asked
for them, which resolves their routing keys.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import socket
import subprocess
import sys
import threading
from typing import Any, Callable, NamedTuple

from monarch._src.config import duration_seconds, get as config_get, runtime_snapshot
from monarch._src.hosts.prestart import start_zygote, take_prestarted
from monarch._src.hosts.zygote import read_message, write_message
from monarch._src.hosts.binding import cpus_for_binding
from monarch._src.mesh import hooks, host_agent
from monarch._src.mesh.controller import root_address
from monarch._src.mesh.host_agent import PlacedTable
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.proc_mesh import ProcTable, report_proc_failure
from monarch._src.runtime.envelope import CONTROL, Control, encode
from monarch._src.runtime.mailbox import PENDING_PREFIX
from monarch._src.mesh.logs import LogSink, TailBuffer
from monarch._src.runtime.ports import CountPort, OncePort, _Entry
from monarch._src.runtime.runtime import Runtime, get_runtime
from monarch._src.shape import Shape, Slice
from monarch._src.supervision.errors import SupervisionError

__all__ = ["LocalHostAgent", "local_agent", "settled", "this_host"]

_STOPPED_REPORT = "actor mesh is stopped due to proc mesh shutdown"
# Heavy modules the zygote imports before forking once the controller has imported them: every
# proc then starts with them loaded (torch alone costs about 2 s of CPU per process).
_PRELOADABLE = ("numpy", "torch")


class _StopLimits(NamedTuple):
    answer: float  # proc_stop_max_idle
    exit: float  # mesh_terminate_timeout
    concurrency: int  # mesh_terminate_concurrency


class LocalHostAgent:
    """Starts procs on this machine. Public methods run on any thread but the runtime loop."""

    is_local = True  # paths given for these hosts (with_python_executable) can be checked here
    supports_proc_bind = True  # spawn_procs(proc_bind=...): CPU affinity of each proc

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None  # started on first spawn
        self._reply_fd = -1
        self._ids = itertools.count()
        self._pending: dict[str, tuple[ProcTable, int]] = {}  # not yet ready: proc id -> where
        self._procs: dict[str, tuple[ProcTable, int]] = {}  # every proc id -> (table, rank)
        self._by_pid: dict[int, tuple[ProcTable, int]] = {}  # pid -> (table, rank)
        self._exited: dict[int, concurrent.futures.Future[str]] = {}  # pid -> exit status
        self._tables: list[ProcTable] = []  # tables not yet stopped
        self._closed = False
        self._preloaded: set[str] = set()  # modules the current zygote was asked to import
        self._by_addr: dict[str, int] = {}  # address -> pid, for procs that are up
        # address -> loop time of its oldest unanswered ping
        self._unanswered: dict[str, float] = {}
        self._heartbeat: asyncio.Task[None] | None = None  # pings live procs, once started
        self.logs = LogSink()
        self.tails = TailBuffer()  # tail_log_lines: the last lines each proc wrote
        rt.mailbox.control["proc_ready"] = self._proc_ready
        rt.mailbox.control["log"] = self._log
        rt.mailbox.control["log_tail"] = self._log_tail
        rt.mailbox.lost_delegate = self._connection_lost
        rt.shutdown_hooks.append(self.close)

    # ---- the zygote -------------------------------------------------------------------------
    def _ensure_zygote(self) -> None:
        """Start the fork server, or a new one if the last one died (lock held)."""
        if self._zygote is not None and self._zygote.poll() is None:
            return
        zygote, reply_fd = take_prestarted() or start_zygote()
        self._zygote, self._reply_fd = zygote, reply_fd
        self._preloaded = set()
        threading.Thread(
            target=self._read_replies, args=(zygote, reply_fd), name="monarch-host-agent",
            daemon=True,
        ).start()

    def _send(self, msg: dict[str, Any]) -> None:
        assert self._zygote is not None and self._zygote.stdin is not None
        write_message(self._zygote.stdin.fileno(), msg)

    def _read_replies(self, zygote: subprocess.Popen[bytes], reply_fd: int) -> None:
        """The child watch: follows one zygote's replies until it is gone."""
        children: set[int] = set()  # this zygote's children that have not exited
        while True:
            try:
                msg = read_message(reply_fd)
            except OSError:
                msg = None
            if msg is None:
                break
            if "spawned" in msg:
                with self._lock:
                    for proc_id, pid in msg["spawned"]:
                        children.add(pid)
                        where = self._procs.get(proc_id)
                        if where is not None:
                            self._by_pid[pid] = where
                            where[0].pids[where[1]] = pid
                        self._exited.setdefault(pid, concurrent.futures.Future())
            elif "exit" in msg:
                children.discard(msg["exit"])
                self._child_exited(msg["exit"], msg["status"])
        # The zygote is gone (killed, or closed at exit): its children died with it (they ask
        # the kernel to kill them when it dies); report each, so nobody waits for them.
        try:
            os.close(reply_fd)
        except OSError:
            pass
        for pid in children:
            self._child_exited(pid, "Killed (its fork server exited)")

    def _child_exited(self, pid: int, status: str) -> None:
        with self._lock:
            fut = self._exited.setdefault(pid, concurrent.futures.Future())
        if not fut.done():
            fut.set_result(status)
        self.rt.call_soon(self._proc_exited, pid, status)

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
    ) -> ProcTable:
        """Fork `len(hosts) * per_host` procs. A served remote host (`hosts/served.py`) passes
        the ids its client chose and `spec` entries (root, listen address, config) to override.
        `proc_bind`: the binding of each proc of a host, by rank on the host (`binding.py`)."""
        cpu_binds = ([cpus_for_binding(b, r) for r, b in enumerate(proc_bind)]
                     if proc_bind is not None else None)
        n = len(hosts) * per_host
        if proc_ids is None:
            proc_ids = [f"{self.rt.proc_id}.{next(self._ids)}" for _ in range(n)]
        table = ProcTable([PENDING_PREFIX + p for p in proc_ids])
        table.proc_ids = list(proc_ids)
        table.has_bootstrap = bootstrap is not None
        table.tail_lines = int((spec or {}).get("tail_log_lines", config_get("tail_log_lines")))
        payload = encode(bootstrap) if bootstrap is not None else None
        common = {
            "controller": self.rt.address,
            "root": root_address(self.rt),
            "sys_path": list(sys.path),
            "cwd": os.getcwd(),
            "config": runtime_snapshot(),
            "bootstrap": payload,
            "env": dict(os.environ),
            # Merged value: under IPython it is on by default here, which a proc cannot see.
            "log_forwarding": bool(config_get("enable_log_forwarding")),
            "pdeathsig": bool(config_get("mesh_bootstrap_enable_pdeathsig")),
            "tail_log_lines": int(config_get("tail_log_lines")),
            "setup": hooks.proc_setup.get() or (),  # the proc wiring, run before it serves
            **({"python": python} if python else {}),
            **(spec or {}),
        }
        with self._lock:
            if self._closed:
                raise RuntimeError("The local host agent was shut down; no procs can be started.")
            for rank, proc_id in enumerate(proc_ids):
                self._pending[proc_id] = self._procs[proc_id] = (table, rank)
            self._tables.append(table)
            self._ensure_zygote()
            preload = [m for m in _PRELOADABLE if m in sys.modules and m not in self._preloaded]
            if preload:
                self._preloaded.update(preload)
                self._send({"preload": preload})
            self._send({"spawn": [
                {**common, "proc_id": p, "rank": rank,
                 **({"cpus": cpu_binds[rank % per_host]} if cpu_binds else {})}
                for rank, p in enumerate(proc_ids)]})
        self.rt.call_soon(self._start_heartbeats)
        # Read now: the setting in force when the procs were asked for applies.
        self.rt.call_soon(self._watch_spawn, table, duration_seconds("mesh_proc_spawn_max_idle"))
        return table

    def _watch_spawn(self, table: ProcTable, idle: float) -> None:
        """mesh_proc_spawn_max_idle (`idle`): procs still not ready after that long with no other
        proc of the mesh becoming ready meanwhile fail, and are killed (loop)."""

        def pending() -> list[int]:
            return [rank for rank, key in enumerate(table.keys)
                    if key.startswith(PENDING_PREFIX) and rank not in table.failed]

        def check(before: int) -> None:
            waiting = pending()
            if not waiting or table.stopped is not None or self._closed:
                return
            if len(waiting) < before:  # progress: give the rest another `idle`
                self.rt.loop.call_later(idle, check, len(waiting))
                return
            for rank in waiting:
                proc_id = table.proc_ids[rank]
                with self._lock:
                    self._pending.pop(proc_id, None)
                pid = table.pids[rank]
                if pid is not None:
                    self._kill([pid])
                self._proc_failed(table, rank, (
                    f"proc {proc_id} did not become ready within mesh_proc_spawn_max_idle "
                    f"({idle:g}s with no proc of its mesh becoming ready)"))

        self.rt.loop.call_later(idle, check, len(pending()))

    def _proc_ready(self, peer: str, args: tuple[Any, ...], reply: Any) -> None:
        proc_id, addr, pid, error = args[:4]
        with self._lock:
            where = self._pending.pop(proc_id, None)
            if where is not None:
                # Watched from here on, whichever of this and the zygote's "spawned" comes first.
                self._by_pid[pid] = where
                self._exited.setdefault(pid, concurrent.futures.Future())
        if where is None:
            return
        table, rank = where
        key = PENDING_PREFIX + proc_id
        if error is not None:
            if len(args) > 4 and args[4] is not None:
                table.setup_errors[rank] = args[4]  # what Monarch's setup actor raises
            table.fail(rank, error)
            self.rt.mailbox.mark_dead(key, SupervisionError(error))
            return
        table.resolve(rank, addr, pid)
        with self._lock:
            self._by_addr[addr] = pid
        self.rt.mailbox.resolve(key, addr)

    def _connection_lost(self, addr: str, err: BaseException) -> bool:
        """A proc's connection broke: let the child watch say why, if it is our child (loop)."""
        with self._lock:
            pid = self._by_addr.get(addr)
            watched = pid is not None and pid in self._by_pid
        if not watched:
            return False
        assert pid is not None
        self.rt.loop.call_later(0.5, self._confirm_lost, addr, err, pid)
        return True

    def _confirm_lost(self, addr: str, err: BaseException, pid: int) -> None:
        """Half a second after a connection broke: a process that is still running (not
        exiting) means the connection itself failed; one that is exiting or gone will be
        reported by the child watch, with its exit status, so wait for that (loop)."""
        if self.rt.mailbox.is_dead(addr):
            return
        if _process_running(pid):
            self.rt.mailbox.mark_dead(addr, err)
        else:
            self.rt.loop.call_later(0.5, self._confirm_lost, addr, err, pid)

    def _proc_exited(self, pid: int, status: str) -> None:
        """The child watch saw `pid` end (runtime loop)."""
        with self._lock:
            where = self._by_pid.pop(pid, None)
        if where is None:
            return
        table, rank = where
        key = table.keys[rank]
        if key.startswith(PENDING_PREFIX):
            self._pending_exited(table, rank, key, status)
            return
        with self._lock:
            if self._by_addr.get(key) != pid:
                return  # a newer proc already listens on this (reused) port
            del self._by_addr[key]
        self._unanswered.pop(key, None)
        if table.stopped is not None:
            self.rt.mailbox.mark_dead(key, SupervisionError(_STOPPED_REPORT))
        elif rank not in table.failed:  # (a proc killed for missing heartbeats already was)
            self._proc_failed(table, rank, self._with_tail(
                table, rank, proc_exit_report(status)))

    def _pending_exited(self, table: ProcTable, rank: int, key: str, status: str) -> None:
        """A proc ended before it reported ready (its bootstrap exited or was killed, its
        interpreter could not start monarch): its rank fails now, with the exit status, and
        whatever waits on it (held spawns and calls, `initialized`, a stop) resolves (loop)."""
        with self._lock:
            self._pending.pop(table.proc_ids[rank], None)
        if table.stopped is not None:
            self.rt.mailbox.mark_dead(key, SupervisionError(_STOPPED_REPORT))
        elif rank not in table.failed:  # (a bootstrap that raised already failed it)
            self._proc_failed(table, rank, self._with_tail(
                table, rank, proc_exit_report(status)))

    def _proc_failed(self, table: ProcTable, rank: int, report: str) -> None:
        """Rank `rank` of `table` failed (a served host forwards this instead)."""
        report_proc_failure(self.rt, table, rank, report)

    # ---- logs -------------------------------------------------------------------------------
    def _log(self, peer: str, args: tuple[Any, ...], reply: Any) -> None:
        proc_id, fd, text = args
        where = self._procs.get(proc_id)
        if where is None:
            return
        table = where[0]
        self.tails.add(proc_id, fd, text, table.tail_lines)
        if table.log_stream:
            self.logs.write(proc_id, table.mesh_key, fd, text, table.log_window)

    def _log_tail(self, peer: str, args: tuple[Any, ...], reply: Any) -> None:
        """Output of a proc that is not forwarded, kept for its failure report only."""
        proc_id, fd, text = args
        where = self._procs.get(proc_id)
        if where is not None:
            self.tails.add(proc_id, fd, text, where[0].tail_lines)

    def _with_tail(self, table: ProcTable, rank: int, report: str) -> str:
        """`report` with the last `tail_log_lines` lines the proc wrote, if any were kept."""
        proc_id = table.proc_ids[rank] if table.proc_ids else None
        lines = self.tails.take(proc_id) if proc_id is not None else []
        if not lines:
            return report
        prefix = f"[{rank}] " if config_get("prefix_with_rank") else ""
        shown = "\n".join(f"    {prefix}{line}" for line in lines)
        return f"{report}\n  last {len(lines)} lines of its output:\n{shown}"

    def flush_logs(self, tables: list[ProcTable] | None = None) -> concurrent.futures.Future[None]:
        """A barrier: returns once every line the procs wrote so far was written here."""
        return self.rt.submit(self._flush_logs(tables))

    async def _flush_logs(self, tables: list[ProcTable] | None) -> None:
        mailbox = self.rt.mailbox
        waits = []
        with self._lock:
            live = list(self._tables) if tables is None else tables
        for table in live:
            keys = [k for k in table.keys if not k.startswith(PENDING_PREFIX)]
            if table.stopped is not None or not keys:
                continue
            entry = CountPort(len(keys))
            port = mailbox.open_port(entry, tuple(keys))
            for key in keys:
                mailbox.post(key, Control(CONTROL, "flush_logs", (), port))
            waits.append(settled(entry.cf))
        if waits:
            await asyncio.wait(waits, timeout=duration_seconds("process_exit_timeout"))
        self.logs.flush_due(force=True)

    def set_log_level(self, table: ProcTable, level: int) -> concurrent.futures.Future[None]:
        async def send() -> None:
            keys = [k for k in table.keys if not k.startswith(PENDING_PREFIX)]
            entry = CountPort(len(keys))
            port = self.rt.mailbox.open_port(entry, tuple(keys))
            for key in keys:
                self.rt.mailbox.post(key, Control(CONTROL, "log_level", (level,), port))
            await asyncio.wrap_future(entry.cf)

        return self.rt.submit(send())

    # ---- heartbeats -------------------------------------------------------------------------
    def _start_heartbeats(self) -> None:
        if self._heartbeat is None and not self._closed:
            self._heartbeat = self.rt.loop.create_task(self._heartbeats())

    async def _heartbeats(self) -> None:
        """Ping every live proc each `heartbeat_interval`; a proc that has not answered for
        `heartbeat_timeout` is hung (stopped, deadlocked, swapped out): it fails and is killed.
        Exits are seen at once by the child watch; this catches the procs that do not exit."""
        loop = self.rt.loop
        mailbox = self.rt.mailbox
        while not self._closed:
            await asyncio.sleep(duration_seconds("heartbeat_interval"))
            timeout = duration_seconds("heartbeat_timeout")
            now = loop.time()
            for table in list(self._tables):
                if table.stopped is not None:
                    continue
                for rank, key in enumerate(table.keys):
                    if key.startswith(PENDING_PREFIX) or rank in table.failed:
                        continue
                    # The oldest ping this proc has not answered yet, if any.
                    asked = self._unanswered.get(key)
                    if asked is not None and now - asked > timeout:
                        pid = table.pids[rank]
                        self._proc_failed(
                            table, rank,
                            f"the process this actor was running on is unresponsive: no "
                            f"heartbeat for {now - asked:.1f}s (heartbeat_timeout {timeout:g}s)",
                        )
                        if pid is not None:
                            self._kill([pid])
                        continue
                    if asked is None:
                        self._unanswered[key] = now
                    port = mailbox.open_port(_Heartbeat(self._unanswered, key))
                    mailbox.post(key, Control(CONTROL, "ping", (), port))

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

    # ---- stopping ---------------------------------------------------------------------------
    def stop_procs(self, table: ProcTable, reason: str) -> concurrent.futures.Future[None]:
        table.begin_stop(reason)
        # Read now: the settings in force when the stop was asked for apply.
        limits = _StopLimits(duration_seconds("proc_stop_max_idle"),
                             duration_seconds("mesh_terminate_timeout"),
                             max(1, int(config_get("mesh_terminate_concurrency"))))
        return self.rt.submit(self._stop(table, reason, limits))

    async def _stop(self, table: ProcTable, reason: str, limits: _StopLimits) -> None:
        """Ask each proc to stop (its actors stop, their __cleanup__ runs) and wait up to
        `proc_stop_max_idle` for its answer, then up to `mesh_terminate_timeout` for it to exit
        before killing it; at most `mesh_terminate_concurrency` procs at a time."""
        if config_get("enable_log_forwarding"):
            await self._flush_logs([table])  # what the procs printed comes out before they go
        limit = asyncio.Semaphore(limits.concurrency)
        await asyncio.gather(*(self._stop_one(table, rank, reason, limit, limits)
                               for rank in range(len(table.keys))))
        with self._lock:
            if table in self._tables:
                self._tables.remove(table)
        mailbox = self.rt.mailbox
        for rank, key in enumerate(table.keys):
            with self._lock:
                reused = self._by_addr.get(key) not in (None, table.pids[rank])
            if not reused:  # else a newer proc of another table listens on that port now
                mailbox.mark_dead(key, SupervisionError(_STOPPED_REPORT))

    async def _stop_one(
        self, table: ProcTable, rank: int, reason: str, limit: asyncio.Semaphore,
        limits: _StopLimits,
    ) -> None:
        mailbox = self.rt.mailbox
        async with limit:
            key = table.keys[rank]
            if key.startswith(PENDING_PREFIX):
                # Never came up (its bootstrap failed, say) or not yet: nothing to ask; kill it.
                pid = table.pids[rank]
                if pid is not None:
                    self._kill([pid])
            else:
                mailbox.expect_exit(key, SupervisionError(_STOPPED_REPORT))
                entry = OncePort()
                port = mailbox.open_port(entry, (key,))
                mailbox.post(key, Control(CONTROL, "stop_proc", (reason,), port))
                await asyncio.wait([settled(entry.cf)], timeout=limits.answer)
            pid = table.pids[rank]
            with self._lock:
                exited = self._exited.get(pid) if pid is not None else None
            if exited is None:
                return
            timeout = limits.exit
            done, _ = await asyncio.wait([settled(exited)], timeout=timeout)
            if not done and pid is not None:
                self._kill([pid])
                await asyncio.wait([settled(exited)], timeout=timeout)

    def _kill(self, pids: list[int]) -> None:
        with self._lock:
            if self._zygote is not None and self._zygote.poll() is None:
                self._send({"kill": pids, "sig": 9})

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
        if self._zygote is None or self._closed:
            return
        try:
            self.shutdown().result(timeout=timeout)
        except Exception:  # at exit, the zygote's stdin watch kills whatever is left
            pass
        with self._lock:
            self._closed = True
            zygote = self._zygote
        if self._heartbeat is not None:
            self.rt.loop.call_soon_threadsafe(self._heartbeat.cancel)
        if zygote.stdin is not None:
            zygote.stdin.close()
        try:
            zygote.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            zygote.kill()


def _process_running(pid: int) -> bool:
    """True if `pid` exists and is neither a zombie nor exiting (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X", b"x")


class _Heartbeat(_Entry):
    """The answer to one ping: the proc is alive, no ping of it is unanswered any more."""

    def __init__(self, unanswered: dict[str, float], key: str) -> None:
        self.unanswered = unanswered
        self.key = key

    def deliver(self, payload: Any, rank: int | None, status: int) -> None:
        self.closed = True
        self.unanswered.pop(self.key, None)

    def fail(self, exc: BaseException) -> None:
        self.closed = True


def settled(cf: concurrent.futures.Future[Any]) -> asyncio.Task[None]:
    """A task that ends when `cf` does, whatever its outcome (nobody reads the outcome)."""

    async def wait() -> None:
        try:
            await asyncio.wrap_future(cf)
        except BaseException:
            pass

    return asyncio.get_running_loop().create_task(wait())


_agent: LocalHostAgent | None = None
_agent_lock = threading.Lock()


def local_agent() -> LocalHostAgent:
    global _agent
    if _agent is None:
        with _agent_lock:
            if _agent is None:
                _agent = LocalHostAgent(get_runtime())
                host_agent.register(_agent)
    return _agent


def this_host() -> HostMesh:
    """The host mesh (no dimensions) of this machine; `spawn_procs` forks real OS processes."""
    return HostMesh.from_agent(local_agent(), Shape([], Slice(offset=0, sizes=[], strides=[])),
                               True)


hooks.local_host.install(local_agent)


def proc_exit_report(status: str) -> str:
    """Monarch's words for a proc that ended on its own: "exited with non-zero code 3" for an
    exit status, "failed: Killed(sig=9)" for a signal."""
    if status.startswith("Exited(") and status.endswith(")"):
        return f"the process this actor was running on exited with non-zero code {status[7:-1]}"
    return f"the process this actor was running on failed: {status}"
