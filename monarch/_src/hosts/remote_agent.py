"""The client's side of remote hosts: `RemoteHostAgent`, the `HostAgent` of attached hosts.

Each host is a process serving as a monarch host (`hosts/served.py`). The agent implements the
`HostAgent` protocol of `mesh/host_mesh.py` by sending control operations to those servers:

* attaching (`host_attach`) happens in the background; `HostMesh.initialized` waits for it and
  raises naming the host that could not be reached; each host's answer carries its versions,
  compared with the controller's once every host has answered (`hosts/versions.py`: a warning,
  or with `version_check="error"` the host is refused), before `initialized` resolves;
* `spawn_procs` returns at once with a `ProcTable` of pending keys; the servers fork the procs,
  which listen on the host's address; `proc_ready`, proc exits and (with log forwarding) output
  are forwarded back (`remote_proc_ready`, `remote_proc_failed`, `remote_log`);
* every `host_heartbeat_interval` each host is pinged; a host silent for
  `host_heartbeat_timeout`, a broken connection to it, or (Dask) the scheduler removing its
  worker makes every rank on it fail: a supervision event per rank, like a proc death.

Rejected alternative: running the remote procs' supervision on the hosts and forwarding only
`MeshFailure`s. Owners, the ownership tree and `ProcTable.failed` live in the client, so hosts
forward facts (ready, exited with a status, output) and the client reports as for local procs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import stat
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from monarch._src.config import duration_seconds, get as config_get, runtime_snapshot
from monarch._src.hosts.addresses import (
    dial_address,
    host_of,
    is_loopback,
    parse_worker_address,
    probe_ssl_context,
)
from monarch._src.hosts.bootstrap_command import check_commands
from monarch._src.hosts.control_ops import (
    HostAttach,
    HostDetach,
    HostFlushLogs,
    HostSpawn,
    HostStop,
    LogLevel,
    RemoteLog,
    RemoteProcFailed,
    RemoteProcReady,
)
from monarch._src.hosts.gateway import attached_dial_address
from monarch._src.hosts.heartbeat import HeartbeatMonitor
from monarch._src.hosts.proc_logs import settled
from monarch._src.hosts.proc_stop import STOPPED_REPORT
from monarch._src.hosts.versions import check_host, warn_mismatches
from monarch._src.mesh import hooks, host_agent
from monarch._src.mesh.controller import root_address
from monarch._src.mesh.host_agent import PlacedTable
from monarch._src.mesh.logs import LogSink
from monarch._src.mesh.proc_mesh import ProcTable, report_proc_failure
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import encode
from monarch._src.runtime.mailbox import pending_key
from monarch._src.runtime.ports import CountPort, OncePort, decode_reply
from monarch._src.runtime.runtime import Runtime
from monarch._src.supervision.errors import SupervisionError

__all__ = ["RemoteHostAgent"]


class _Host:
    """One attached host, as the client sees it."""

    def __init__(self, rank: int, target: str | Any) -> None:
        self.rank = rank
        self.target = target  # an address, or a future of one
        self.addr: str | None = None  # the host server's address, once known
        self.connected: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self.lost: str | None = None  # why the host was lost, once it was
        self.detached = False

    @property
    def label(self) -> str:
        return self.addr or (self.target if isinstance(self.target, str) else f"#{self.rank}")


class _Placed:
    """Where each rank of one proc table lives: host rank per table rank, and proc ids."""

    def __init__(self, table_id: str, host_of_rank: list[int], proc_ids: list[str]) -> None:
        self.table_id = table_id
        self.host_of_rank = host_of_rank
        self.proc_ids = proc_ids


class RemoteHostAgent:
    """The `HostAgent` of an attached host mesh: forwards its work to remote host servers.

    Public methods run on any thread but the runtime loop.
    """

    is_local = False  # paths given for these hosts cannot be checked from here

    def __init__(self, rt: Runtime, targets: Sequence[Any], name: str | None,
                 on_shutdown: Callable[[], None] | None = None) -> None:
        self.rt = rt
        self.name = name or "hosts"
        self.hosts = [_Host(i, t) for i, t in enumerate(targets)]
        self.logs = LogSink()
        self._tables: dict[int, tuple[ProcTable, _Placed]] = {}  # id(table) -> placement
        self._lock = threading.Lock()
        self._closed = False
        self._on_shutdown = on_shutdown
        self._reports: dict[int, dict[str, str | None] | None] = {}  # host rank -> versions
        self._unsettled = len(self.hosts)  # hosts that have neither attached nor failed yet
        # Each attached host is pinged; one silent for host_heartbeat_timeout is lost.
        self._heartbeats: HeartbeatMonitor[_Host] = HeartbeatMonitor(
            rt, interval="host_heartbeat_interval", timeout="host_heartbeat_timeout",
            targets=self._watched_hosts, on_silent=self._silent, running=self._attached_any)
        _install(rt)
        for host in self.hosts:
            rt.submit(self._connect(host))
        rt.shutdown_hooks.add(self.close)

    # ---- connecting -------------------------------------------------------------------------
    async def _connect(self, host: _Host) -> None:
        try:
            target = host.target
            if not isinstance(target, str):
                target = await _resolve(target)
            scheme, h, port = parse_worker_address(target)
            host.addr = dial_address(scheme, h, port)
            me = host_of(self.rt.address)
            if scheme == "unix":  # a worker on this machine: its procs listen as ours do
                h = host.addr
            elif self.rt.address.startswith("unix://") and not is_loopback(h):
                raise RuntimeError(
                    f"this client listens on a unix-domain socket ({self.rt.address}), which the "
                    f"host at {host.addr} cannot reach. Call "
                    "monarch.actor.enable_transport('tcp') before any other monarch call."
                )
            if scheme != "unix" and is_loopback(me) and not is_loopback(h):
                raise RuntimeError(
                    f"this client listens on {self.rt.address} (loopback), which the host at "
                    f"{host.addr} cannot reach. Call monarch.actor.enable_transport('tcp') (or "
                    "enable_transport('tcp://<this machine's address>:0')) before any other "
                    "monarch call."
                )
            if host.addr != attached_dial_address():  # (else its connection is open)
                await probe_address(host.addr)
            # Attaching says a host serves there now: a dead one known at that address (a host
            # lost before, a proc whose port the OS gave to this host) is another process.
            self.rt.mailbox.revive(host.addr)
            entry = OncePort()
            port_addr = self.rt.mailbox.open_port(entry, (host.addr,))
            self.rt.mailbox.post(host.addr, control(
                HostAttach(self.rt.address, root_address(self.rt), h), port_addr))
            timeout = duration_seconds("mesh_attach_config_timeout")
            try:
                info = decode_reply(await asyncio.wait_for(asyncio.wrap_future(entry.cf),
                                                           timeout))
            except asyncio.TimeoutError:
                self.rt.mailbox.close_port(port_addr)
                raise RuntimeError(f"no answer within {timeout:g}s (is it serving another "
                                   "client?)") from None
            try:
                check_host(host.addr, info.get("versions"))
            except RuntimeError:
                await self._release(host)
                raise
        except BaseException as exc:
            err = RuntimeError(f"could not attach to the host {host.label}: {_why(exc)}")
            host.lost = str(err)
            self._settle()
            host.connected.set_exception(err)
            return
        self._reports[host.rank] = info.get("versions")
        raised = self._settle()
        if raised is not None:  # the version warning, turned into an error (-W error)
            await self._release(host)
            host.lost = f"could not attach to the host {host.label}: {raised}"
            host.connected.set_exception(raised)
            return
        _agents_by_host.setdefault(host.addr, []).append(self)
        host_agent.register(self)
        host.connected.set_result(info)
        self._heartbeats.start()

    async def _release(self, host: _Host) -> None:
        """Give up a host that answered the attach, and wait (bounded) until it let go of this
        client: an attach that follows at once is then served afresh, not dropped (loop)."""
        assert host.addr is not None
        entry = OncePort()
        port = self.rt.mailbox.open_port(entry, (host.addr,))
        self.rt.mailbox.post(host.addr, control(HostDetach(False), port))
        await asyncio.wait([settled(entry.cf)],
                           timeout=3 * duration_seconds("process_exit_timeout"))

    def _settle(self) -> Exception | None:
        """One more host attached or failed. After the last one, compare the versions the
        attached hosts reported with this controller's (a warning at most; `version_check`),
        before that host's `connected` resolves, so `HostMesh.initialized` returns after the
        warning. Returns the warning when the warnings filter turned it into an error (loop)."""
        self._unsettled -= 1
        if self._unsettled > 0:
            return None
        try:
            warn_mismatches(self.host_versions())
        except Exception as exc:
            return exc
        return None

    def host_versions(self) -> dict[str, dict[str, str | None] | None]:
        """The versions each attached host reported (package -> version, None where not
        installed; see `hosts/versions.py`) by host address, in host order; a host whose
        monarch predates the version report maps to None (any thread)."""
        return {self.hosts[rank].label: report for rank, report in sorted(self._reports.items())}

    def connected(self) -> concurrent.futures.Future[None]:
        """Completes once every host is attached; fails naming the first that was not."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        left = [len(self.hosts)]
        lock = threading.Lock()

        def one(f: concurrent.futures.Future[Any]) -> None:
            with lock:
                if done.done():
                    return
                exc = f.exception()
                if exc is not None:
                    done.set_exception(exc)
                    return
                left[0] -= 1
                if left[0] == 0:
                    done.set_result(None)

        if not self.hosts:
            done.set_result(None)
        for host in self.hosts:
            host.connected.add_done_callback(one)
        return done

    # ---- health -----------------------------------------------------------------------------
    def _watched_hosts(self) -> list[tuple[str, _Host]]:
        """The hosts to ping: attached, neither lost nor detached (loop)."""
        return [(h.addr, h) for h in self.hosts
                if h.addr is not None and h.lost is None and not h.detached
                and h.connected.done() and h.connected.exception() is None]

    def _attached_any(self) -> bool:
        return any(h.lost is None and not h.detached for h in self.hosts)

    def _silent(self, addr: str, host: _Host, silence: float, timeout: float) -> None:
        self.host_lost(host, f"no heartbeat for {silence:.1f}s (host_heartbeat_timeout "
                             f"{timeout:g}s)")

    def host_lost(self, host: _Host, reason: str) -> None:
        """Every rank on `host` fails: one supervision event per rank (runtime loop)."""
        if host.lost is not None or host.detached:
            return
        host.lost = f"the host {host.label} was lost: {reason}"
        report = f"the process this actor was running on failed: {host.lost}"
        with self._lock:
            placed = list(self._tables.values())
        for table, where in placed:
            if table.stopped is not None:
                continue
            for rank, h in enumerate(where.host_of_rank):
                if h == host.rank and rank not in table.failed:
                    self._proc_failed(table, rank, report)
        if host.addr is not None:
            self.rt.mailbox.mark_dead(host.addr, SupervisionError(report))

    def lost_by_address(self, addr: str, reason: str) -> None:
        """The host whose server listens at `addr` is gone (any thread)."""
        for host in self.hosts:
            if host.addr == addr:
                self.rt.call_soon(self.host_lost, host, reason)

    # ---- spawning ---------------------------------------------------------------------------
    def _on_this_machine(self, host: _Host) -> bool:
        """Whether `host` runs on this machine, as far as its address tells: a unix socket,
        loopback, or this process's own host. A host whose address is not known yet counts
        as another machine."""
        address = host.addr or (host.target if isinstance(host.target, str) else None)
        if address is None:
            return False
        try:  # the parser `_connect` uses: bare host:port, ipc://, DIAL@BIND aliases
            scheme, name, _ = parse_worker_address(address)
        except ValueError:  # connecting will fail and say why; no tree decision rests on it
            return False
        return scheme == "unix" or is_loopback(name) or name == host_of(self.rt.address)

    def spawn_procs(
        self, hosts: list[int], per_host: int, bootstrap: Callable[[], Any] | None, *,
        python: str | None = None, proc_bind: list[dict[str, str]] | None = None,
        commands: list[Any] | None = None,
    ) -> ProcTable:
        """Start `per_host` procs on each of `hosts` (host ranks), host-major; never blocks.
        `proc_bind` (one binding per proc of a host) is applied by each host's server, against
        that host's CPUs: a binding it cannot honour fails those procs, saying why. `commands`
        (one bootstrap command per proc) travel as records; each host's server runs them."""
        if self._closed:
            raise RuntimeError("HostMesh has already been shut down")
        records = (check_commands(commands, len(hosts) * per_host, "HostMesh.spawn_procs")
                   if commands is not None else None)
        tag = uuid.uuid4().hex[:8]
        counter = itertools.count()
        proc_ids = [f"{self.rt.proc_id}.{tag}.{next(counter)}" for _ in hosts for _ in
                    range(per_host)]
        host_of_rank = [h for h in hosts for _ in range(per_host)]
        table = ProcTable([pending_key(p) for p in proc_ids], hosts=host_of_rank)
        table.one_machine = all(self._on_this_machine(self.hosts[h]) for h in set(hosts))
        table.has_bootstrap = bootstrap is not None
        table_id = f"{tag}"
        placed = _Placed(table_id, host_of_rank, proc_ids)
        with self._lock:
            self._tables[id(table)] = (table, placed)
        for rank, proc_id in enumerate(proc_ids):
            _procs[proc_id] = (self, table, rank)
        spec: dict[str, Any] = {
            "root": root_address(self.rt),
            "sys_path": list(sys.path),
            "prefixes": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix}),
            "cwd": os.getcwd(),
            "config": runtime_snapshot(),
            "bootstrap": encode(bootstrap) if bootstrap is not None else None,
            "log_forwarding": bool(config_get("enable_log_forwarding")),
            "tail_log_lines": int(config_get("tail_log_lines")),  # the host keeps the tails
            "setup": hooks.proc_setup.get() or (),  # the proc wiring, resolved on the host
        }
        if python:
            spec["python"] = python  # the procs exec this interpreter (with_python_executable)
        if proc_bind is not None:
            spec["proc_bind"] = [dict(binding) for binding in proc_bind]
        for i, h in enumerate(hosts):
            ids = proc_ids[i * per_host:(i + 1) * per_host]
            host_spec = spec if records is None else {
                **spec, "commands": records[i * per_host:(i + 1) * per_host]}
            self.rt.submit(self._spawn_on(self.hosts[h], table, table_id, ids, host_spec,
                                          i * per_host))
        return table

    async def _spawn_on(self, host: _Host, table: ProcTable, table_id: str, ids: list[str],
                        spec: dict[str, Any], first: int) -> None:
        try:
            await asyncio.wrap_future(host.connected)
            if host.lost is not None:
                raise RuntimeError(host.lost)
        except BaseException as exc:
            for k in range(len(ids)):
                self._never_started(table, first + k, f"{_why(exc)}")
            return
        if table.stopped is not None:
            return
        assert host.addr is not None
        self.rt.mailbox.post(host.addr, control(HostSpawn(self.rt.address, table_id, ids, spec)))

    def _never_started(self, table: ProcTable, rank: int, report: str) -> None:
        if rank in table.failed:
            return
        table.fail(rank, report)
        self.rt.mailbox.mark_dead(table.keys[rank], SupervisionError(report))

    def _proc_ready(self, table: ProcTable, rank: int, addr: str, pid: int,
                    error: str | None) -> None:
        key = table.keys[rank]
        if error is not None:
            self._never_started(table, rank, error)
            return
        if table.is_up(rank):
            return
        table.resolve(rank, addr, pid)
        self.rt.mailbox.resolve(key, addr)

    def _proc_exited(self, table: ProcTable, rank: int, report: str) -> None:
        if table.stopped is not None:
            self.rt.mailbox.mark_dead(table.keys[rank], SupervisionError(STOPPED_REPORT))
        elif rank not in table.failed:
            self._proc_failed(table, rank, report)

    def _proc_failed(self, table: ProcTable, rank: int, report: str) -> None:
        """Rank `rank` failed on its host: record it, tell the owners (loop)."""
        report_proc_failure(self.rt, table, rank, report)

    # ---- logs -------------------------------------------------------------------------------
    def _log(self, table: ProcTable, proc_id: str, fd: int, text: str) -> None:
        if table.log_stream:
            self.logs.write(proc_id, table.mesh_key, fd, text, table.log_window)

    def flush_logs(self, tables: list[ProcTable] | None = None) -> concurrent.futures.Future[None]:
        """A barrier: returns once every line the procs wrote so far was written here."""
        return self.rt.submit(self._ask_all(HostFlushLogs()))

    def set_log_level(self, table: ProcTable, level: int) -> concurrent.futures.Future[None]:
        """Set the Python logging level in every live proc of `table`."""
        async def send() -> None:
            keys = [k for i, k in enumerate(table.keys)
                    if table.is_up(i) and i not in table.failed]
            entry = CountPort(len(keys))
            port = self.rt.mailbox.open_port(entry, tuple(keys))
            for key in keys:
                self.rt.mailbox.post(key, control(LogLevel(level), port))
            await asyncio.wait_for(asyncio.wrap_future(entry.cf),
                                   duration_seconds("process_exit_timeout"))

        return self.rt.submit(send())

    async def _ask_all(self, op: tuple[Any, ...], hosts: list[_Host] | None = None) -> None:
        """Send `op` to every live attached host and wait (bounded) for their answers."""
        waits = []
        for host in hosts if hosts is not None else self.hosts:
            if host.addr is None or host.lost is not None or not host.connected.done() \
                    or host.connected.exception() is not None:
                continue
            entry = OncePort()
            port = self.rt.mailbox.open_port(entry, (host.addr,))
            self.rt.mailbox.post(host.addr, control(op, port))
            waits.append(settled(entry.cf))
        if waits:
            await asyncio.wait(waits, timeout=3 * duration_seconds("process_exit_timeout"))
        if type(op) is HostFlushLogs:
            self.logs.flush_due(force=True)

    # ---- queries ----------------------------------------------------------------------------
    def snapshot(self) -> list[PlacedTable]:
        """The proc tables not yet stopped, with the label of each rank's host (any thread)."""
        with self._lock:
            placed = list(self._tables.values())
        return [PlacedTable(table, tuple(self.hosts[h].label for h in where.host_of_rank))
                for table, where in placed]

    def live_addresses(self) -> list[str]:
        """The addresses of the procs that are up, on every host (any thread)."""
        with self._lock:
            tables = [table for table, _ in self._tables.values()]
        return [key for table in tables if table.stopped is None
                for rank, key in enumerate(table.keys)
                if table.is_up(rank) and rank not in table.failed]

    # ---- stopping ---------------------------------------------------------------------------
    def stop_procs(self, table: ProcTable, reason: str) -> concurrent.futures.Future[None]:
        """Stop the procs of `table` through their hosts (bounded); stopped is not failed."""
        table.begin_stop(reason)
        return table.forget_when_stopped(self.rt.submit(self._stop(table, reason)))

    async def _stop(self, table: ProcTable, reason: str) -> None:
        with self._lock:
            found = self._tables.pop(id(table), None)
        if found is None:
            return
        placed = found[1]
        mailbox = self.rt.mailbox
        if config_get("enable_log_forwarding"):
            await self._ask_all(HostFlushLogs())
        for rank, key in enumerate(table.keys):
            if table.is_up(rank):
                mailbox.expect_exit(key, SupervisionError(STOPPED_REPORT))
        on = sorted(set(placed.host_of_rank))
        await self._ask_all(HostStop(placed.table_id, reason), [self.hosts[h] for h in on])
        for key in table.keys:
            mailbox.mark_dead(key, SupervisionError(STOPPED_REPORT))
        for proc_id in placed.proc_ids:
            _procs.pop(proc_id, None)

    def stop_all(self) -> concurrent.futures.Future[None]:
        """Stop every proc started through this agent; the hosts stay attached."""
        with self._lock:
            tables = [t for t, _ in self._tables.values()]
        futures = [self.stop_procs(t, "host mesh stopped") for t in tables]

        async def all_done() -> None:
            if futures:
                await asyncio.wait([asyncio.wrap_future(f) for f in futures])

        return self.rt.submit(all_done())

    def shutdown(self) -> concurrent.futures.Future[None]:
        """Stop every proc, then detach from the hosts (`monarch worker` processes exit)."""
        self._closed = True
        stopped = self.stop_all()

        async def detach() -> None:
            await asyncio.wrap_future(stopped)
            # A host still attaching (attach runs in the background) is waited for, bounded:
            # skipped, it would never be told, and its `monarch worker` would never exit.
            pending = [asyncio.wrap_future(h.connected) for h in self.hosts
                       if h.lost is None and not h.connected.done()]
            if pending:
                await asyncio.wait(pending, timeout=duration_seconds("mesh_attach_config_timeout"))
            await self._ask_all(HostDetach(True))
            for host in self.hosts:
                host.detached = True
                attached = _agents_by_host.get(host.addr or "", [])
                if self in attached:
                    attached.remove(self)
            host_agent.forget(self)
            if self._on_shutdown is not None:
                on_shutdown, self._on_shutdown = self._on_shutdown, None
                await asyncio.get_running_loop().run_in_executor(None, on_shutdown)

        return self.rt.submit(detach())

    def close(self, timeout: float = 5.0) -> None:
        """At exit: stop this client's procs, bounded by `timeout`. Workers someone else runs
        stay up for their next client (a job's workers outlive each `monarch exec`); only
        workers this process started itself (`on_shutdown`) are shut down with it."""
        if self._closed or all(h.detached for h in self.hosts):
            return
        try:
            done = self.shutdown() if self._on_shutdown is not None else self.stop_all()
            done.result(timeout=timeout)
        except Exception:  # at exit, the hosts notice the lost client and clean up themselves
            pass


# ---- control handlers of the client (one set per runtime) ------------------------------------
# proc id -> (agent, table, rank), for procs started on remote hosts by this process.
_procs: dict[str, tuple[RemoteHostAgent, ProcTable, int]] = {}
# host server address -> agents attached to it, to find whom a lost connection concerns.
_agents_by_host: dict[str, list[RemoteHostAgent]] = {}
_installed: set[int] = set()


def _install(rt: Runtime) -> None:
    if id(rt) in _installed:
        return
    _installed.add(id(rt))

    def ready(peer: str, report: RemoteProcReady, reply: Any) -> None:
        found = _procs.get(report.proc_id)
        if found is not None:
            agent, table, rank = found
            if report.error is not None and report.setup_error is not None:
                table.setup_errors[rank] = report.setup_error  # what Monarch's setup actor raises
            agent._proc_ready(table, rank, report.address, report.pid, report.error)

    def failed(peer: str, op: RemoteProcFailed, reply: Any) -> None:
        found = _procs.get(op.proc_id)
        if found is not None:
            agent, table, rank = found
            agent._proc_exited(table, rank, op.report)

    def log(peer: str, out: RemoteLog, reply: Any) -> None:
        found = _procs.get(out.proc_id)
        if found is not None:
            found[0]._log(found[1], out.proc_id, out.fd, out.text)

    def peer_lost(peer: str, err: BaseException) -> None:
        for agent in list(_agents_by_host.get(peer, ())):
            for host in agent.hosts:
                if host.addr == peer:
                    agent.host_lost(host, f"the connection to it broke: {err}")

    rt.mailbox.control.register(RemoteProcReady, ready)
    rt.mailbox.control.register(RemoteProcFailed, failed)
    rt.mailbox.control.register(RemoteLog, log)
    rt.mailbox.on_peer_lost.add(peer_lost)


async def _resolve(target: Any) -> str:
    """The address a worker future resolves to (a monarch Future or a concurrent one), within
    `host_spawn_ready_timeout` (the worker is still starting)."""
    timeout = duration_seconds("host_spawn_ready_timeout")
    try:
        return await asyncio.wait_for(_resolved(target, timeout), timeout)
    except (asyncio.TimeoutError, concurrent.futures.TimeoutError, TimeoutError):
        raise RuntimeError(
            f"the worker's address did not resolve within host_spawn_ready_timeout "
            f"({timeout:g}s); raise it if workers take longer to start"
        ) from None


async def _resolved(target: Any, timeout: float) -> str:
    # shielded: giving up on the caller's future must not cancel it
    if isinstance(target, concurrent.futures.Future):
        return str(await asyncio.shield(asyncio.wrap_future(target)))
    if asyncio.isfuture(target):
        return str(await asyncio.shield(target))
    get = getattr(target, "get", None)
    if get is None:
        raise TypeError(f"attach_to_workers: a worker must be an address or a future of one; "
                        f"got {type(target).__name__}.")
    loop = asyncio.get_running_loop()
    return str(await loop.run_in_executor(None, lambda: get(timeout=timeout)))


async def _probe(host: str, port: int, within: float | None = None) -> None:
    """Fail fast, naming the reason, when nothing listens at host:port: connection refused
    for `within` seconds (`host_heartbeat_timeout`), or no TCP answer at all within it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (duration_seconds("host_heartbeat_timeout") if within is None
                              else within)
    ssl_context = probe_ssl_context()  # a TLS listener would log a bare TCP probe as an attack
    while True:
        left = deadline - loop.time()
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context), max(left, 0.1))
        except (OSError, asyncio.TimeoutError) as exc:
            if isinstance(exc, ConnectionRefusedError) and loop.time() < deadline:
                await asyncio.sleep(0.1)
                continue
            raise RuntimeError(f"nothing answers at {host}:{port} "
                               f"({_why(exc)})") from None
        writer.close()
        return


async def probe_address(address: str, within: float | None = None) -> None:
    """Fail fast, naming the reason, when no worker listens at `address` (`tcp://h:p`,
    `tls://h:p` or `unix:///path`) within `within` seconds (`host_heartbeat_timeout`)."""
    if address.startswith("unix://"):
        await _probe_unix(address, within)
        return
    _, host, port = parse_worker_address(address)
    await _probe(host, port, within)


async def _probe_unix(address: str, within: float | None = None) -> None:
    """`_probe` for a worker on a unix-domain socket (`unix:///path`): its socket file appears
    within `host_heartbeat_timeout`. (A connection made only to probe would make the worker's
    listener log a failed handshake.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (duration_seconds("host_heartbeat_timeout") if within is None
                              else within)
    path = address[len("unix://"):]
    while True:
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                return
            why = "the path is not a socket"
        except OSError as exc:
            why = _why(exc)
        if loop.time() >= deadline:
            raise RuntimeError(f"nothing answers at {address} ({why})")
        await asyncio.sleep(0.05)


def _why(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__

