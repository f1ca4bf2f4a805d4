"""The worker side of a remote host: a host agent that serves one client at a time.

A `HostServer` lives in a process that is a monarch host for somebody else: the `monarch worker`
command (`run_worker_loop_forever`) or a Dask worker hosting the agent through a worker plugin
(`hosts/dask.py`). It owns a `ServedAgent`, a `LocalHostAgent` whose zygote forks the procs, and
answers these control operations from its client (`hosts/remote.py` is the other end):

* `host_attach(client, root, dialed_host)`: become that client's host; a second client waits in
  line until the first one detached or was lost; the answer carries this host's pid, hostname,
  address, interpreter and versions (`hosts/versions.py`), which the client compares to its own;
* `host_spawn(table_id, proc_ids, spec)`: fork procs whose `proc_ready`, exits and output are
  forwarded to the client (`remote_proc_ready`, `remote_proc_failed`, `remote_log`);
* `host_stop(table_id, reason)`: stop one proc table; `host_flush_logs()`: a log barrier;
* `host_detach(exit)`: stop every proc of the client and serve the next (or exit the loop);
* `gateway_attach(client)`: a client bootstrapping through this host (`attach(addr)`,
  `hosts/gateway.py`) opened its connection; answered at once.

The server pings its client every `host_heartbeat_interval`; a client that stops answering for
`host_heartbeat_timeout`, or whose connection breaks, is gone: its procs are stopped (killed
after `process_exit_timeout`) and the next client is served.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections import deque
from typing import Any

import monarch._src.mesh.agent  # noqa: F401  (installs the proc agent in new runtimes)
from monarch._src.config import duration_seconds, get as config_get
from monarch._src.hosts.binding import cpus_for_binding
from monarch._src.hosts.control_ops import (
    GatewayAttach,
    HostAttach,
    HostDetach,
    HostFlushLogs,
    HostSpawn,
    HostStop,
    ProcOutput,
    ProcReady,
    RemoteLog,
    RemoteProcFailed,
    RemoteProcReady,
)
from monarch._src.hosts.heartbeat import HeartbeatMonitor
from monarch._src.hosts.local import LocalHostAgent
from monarch._src.hosts.versions import collect as collect_versions
from monarch._src.mesh.proc_mesh import ProcTable
from monarch._src.runtime.control import control
from monarch._src.runtime.runtime import Runtime
from monarch._src.supervision.errors import SupervisionError

__all__ = ["HostServer", "ServedAgent"]

logger = logging.getLogger(__name__)


class ServedAgent(LocalHostAgent):
    """A local host agent whose procs belong to a remote client: what happens to them is
    forwarded to that client instead of being supervised here."""

    def __init__(self, rt: Runtime, server: HostServer) -> None:
        super().__init__(rt)
        self.server = server

    def _proc_ready(self, peer: str, ready: ProcReady, reply: Any) -> None:
        super()._proc_ready(peer, ready, reply)
        self.server.forward(ready.proc_id, RemoteProcReady(*ready))

    def _proc_failed(self, table: ProcTable, rank: int, report: str) -> None:
        table.fail(rank, report)
        self.rt.mailbox.mark_dead(table.keys[rank], SupervisionError(report))
        proc_id = self.server.proc_id_of(table, rank)
        if proc_id is not None:
            self.server.forward(proc_id, RemoteProcFailed(proc_id, report))

    def _refuse(self, table: ProcTable, rank: int, error: str) -> None:
        super()._refuse(table, rank, error)
        proc_id = self.server.proc_id_of(table, rank)
        if proc_id is not None:  # the client fails the rank as for a bootstrap that raised
            self.server.forward(proc_id, RemoteProcReady(proc_id, "", 0, error))

    def _log(self, peer: str, out: ProcOutput, reply: Any) -> None:
        where = self._procs.get(out.proc_id)
        if where is not None:  # tail_log_lines: this host writes the failure report
            self.logs.received(where[0], out.proc_id, out.fd, out.text, forwarded=False)
        self.server.forward(out.proc_id, RemoteLog(*out))


class HostServer:
    """Serves one client at a time on this process's runtime (see the module docstring)."""

    def __init__(self, rt: Runtime, *, exit_on_shutdown: bool) -> None:
        self.rt = rt
        self.exit_on_shutdown = exit_on_shutdown
        self.agent = ServedAgent(rt, self)
        self.client: str | None = None  # address of the client served now
        self.dialed_host = "127.0.0.1"  # the host part of the address the client dialed
        self.exited = threading.Event()  # set once a client asked this host to exit
        self._queue: deque[tuple[HostAttach, Any]] = deque()  # attaches waiting in line
        self._tables: dict[str, ProcTable] = {}  # client's table id -> procs forked here
        self._ids: dict[int, list[str]] = {}  # id(table) -> proc ids by local rank
        self._owner: dict[str, str] = {}  # proc id -> client address
        # The client is pinged; one silent for host_heartbeat_timeout is dropped.
        self._heartbeats: HeartbeatMonitor[str] = HeartbeatMonitor(
            rt, interval="host_heartbeat_interval", timeout="host_heartbeat_timeout",
            targets=lambda: [(self.client, self.client)] if self.client is not None else [],
            on_silent=self._client_silent, running=lambda: self.client is not None,
            fail_with_peer=True)
        control = rt.mailbox.control
        control.register(HostAttach, self._attach)
        control.register(HostSpawn, self._spawn)
        control.register(HostStop, self._stop)
        control.register(HostFlushLogs, self._flush_logs)
        control.register(HostDetach, self._detach)
        control.register(GatewayAttach, self._gateway_attach)
        rt.mailbox.on_peer_lost.add(self._peer_lost)
        # Start the fork server now: it imports the proc runtime while no client waits, so a
        # client's first spawn_procs only forks (as the controller's prestarted zygote does).
        self.agent.zygote.start()

    @property
    def address(self) -> str:
        return self.rt.address

    # ---- forwarding -------------------------------------------------------------------------
    def forward(self, proc_id: str, op: tuple[Any, ...]) -> None:
        """Send control operation `op` about `proc_id` to the client that owns that proc, if
        alive."""
        client = self._owner.get(proc_id)
        if client is not None and not self.rt.mailbox.is_dead(client):
            self.rt.mailbox.post(client, control(op))

    def proc_id_of(self, table: ProcTable, rank: int) -> str | None:
        """The client's id of the proc at `rank` of a table forked here."""
        ids = self._ids.get(id(table))
        return ids[rank] if ids is not None and rank < len(ids) else None

    # ---- control operations (runtime loop) ---------------------------------------------------
    def _attach(self, peer: str, op: HostAttach, reply: Any) -> None:
        # The client is heard now: one this host lost (a cut link, whose connection then broke)
        # and that attaches again is alive, not the dead peer its address stayed marked as, or
        # every answer to it (this one first) would be dropped as undeliverable.
        self.rt.mailbox.revive(op.client)
        if self.client is not None and self.client != op.client:
            # One client at a time: wait in line; check now whether the current one is alive.
            self._queue.append((op, reply))
            self._ping_client()
            return
        self._serve(op, reply)

    def _gateway_attach(self, peer: str, op: GatewayAttach, reply: Any) -> None:
        """A client bootstrapping through this host (`attach(addr)`, `hosts/gateway.py`): its
        connection is open once this answer arrives; it attaches as a client later."""
        self.rt.mailbox.revive(op.client)
        self.rt.mailbox.reply(reply, {"address": self.address, "pid": os.getpid()})

    def _serve(self, attach: HostAttach, reply: Any) -> None:
        client = attach.client
        self.client = client
        self.dialed_host = attach.dialed_host
        self._heartbeats.forget(client)
        self._heartbeats.start()
        self.rt.mailbox.reply(reply, {
            "pid": os.getpid(),
            "hostname": _hostname(),
            "address": self.address,
            "python": sys.executable,
            "versions": collect_versions(),  # compared by the client (hosts/versions.py)
        })

    def _spawn(self, peer: str, op: HostSpawn, reply: Any) -> None:
        client, table_id, proc_ids, spec = op.client, op.table_id, op.proc_ids, op.spec
        if client != self.client:
            for proc_id in proc_ids:
                refused = RemoteProcReady(
                    proc_id, "", 0, f"host {self.address} is serving another client"
                )
                self.rt.mailbox.post(client, control(refused))
            return
        spec = dict(spec)
        spec["listen"] = _listen_address(self.dialed_host)
        ports = config_get("remote_alloc_allowed_port_range")
        if ports is not None:
            spec["port_range"] = (ports.start, 65536 if ports.stop is None else ports.stop)
        spec["sys_path"] = _merge_paths(spec.get("sys_path", []))
        if not os.path.isdir(spec.get("cwd", "")):
            spec["cwd"] = os.getcwd()
        spec["env"] = dict(os.environ)
        proc_bind = spec.pop("proc_bind", None)
        commands = spec.pop("commands", None)  # bootstrap commands, run by this host's agent
        try:
            if proc_bind is not None:  # checked against this host's CPUs before anything
                for rank, binding in enumerate(proc_bind):
                    cpus_for_binding(binding, rank)
        except ValueError as exc:
            for proc_id in proc_ids:
                refused = RemoteProcReady(proc_id, "", 0, f"host {self.address}: {exc}")
                self.rt.mailbox.post(client, control(refused))
            return
        for proc_id in proc_ids:
            self._owner[proc_id] = client
        table = self.agent.spawn_procs([0], len(proc_ids), None, proc_ids=list(proc_ids),
                                       spec=spec, proc_bind=proc_bind, commands=commands)
        self._tables[table_id] = table
        self._ids[id(table)] = list(proc_ids)

    def _stop(self, peer: str, op: HostStop, reply: Any) -> None:
        table = self._tables.pop(op.table_id, None)
        if table is None:
            if reply is not None:
                self.rt.mailbox.reply(reply, None)
            return
        fut = self.agent.stop_procs(table, op.reason)
        fut.add_done_callback(lambda _: self._answer(reply))

    def _answer(self, reply: Any) -> None:
        if reply is not None:
            self.rt.call_soon(self.rt.mailbox.reply, reply, None)

    def _flush_logs(self, peer: str, op: HostFlushLogs, reply: Any) -> None:
        fut = self.agent.flush_logs(list(self._tables.values()))
        fut.add_done_callback(lambda _: self._answer(reply))

    def _detach(self, peer: str, op: HostDetach, reply: Any) -> None:
        self.rt.loop.create_task(self._drop_client("the client detached", reply, op.exit_host))

    # ---- the client's health ----------------------------------------------------------------
    def _ping_client(self) -> None:
        if self.client is not None:
            self._heartbeats.ping(self.client)

    def _client_silent(self, client: str, _: str, silence: float, timeout: float) -> None:
        self.rt.loop.create_task(self._drop_client(
            f"the client {client} stopped answering for {timeout:g}s", None, False))

    def _peer_lost(self, peer: str, err: BaseException) -> None:
        if peer == self.client:
            self.rt.loop.create_task(self._drop_client(f"lost the client {peer}: {err}", None,
                                                       False))

    async def _drop_client(self, reason: str, reply: Any, exit_host: bool) -> None:
        """Stop every proc of the current client, answer `reply`, then serve the next one."""
        client = self.client
        if client is None:
            if reply is not None:
                self.rt.mailbox.reply(reply, None)
            return
        self.client = None
        self._heartbeats.forget(client)
        tables = list(self._tables.values())
        self._tables.clear()
        futures = [asyncio.wrap_future(self.agent.stop_procs(t, reason)) for t in tables]
        if futures:
            await asyncio.wait(futures, timeout=3 * duration_seconds("process_exit_timeout"))
        self._owner = {p: c for p, c in self._owner.items() if c != client}
        if reply is not None:
            self.rt.mailbox.reply(reply, None)
        if exit_host and self.exit_on_shutdown:
            self.exited.set()
            return
        while self._queue and self.client is None:
            attach, waiting_reply = self._queue.popleft()
            if not self.rt.mailbox.is_dead(attach.client):
                self._serve(attach, waiting_reply)


def _listen_address(dialed_host: str) -> str | None:
    """Where this host's procs listen: `host_listen_address`, else the host the client used
    to reach this one (so it can reach the procs the same way), on a free port. A client that
    dialed a unix-domain socket runs on this machine: the procs listen as its own do (None)."""
    configured = config_get("host_listen_address")
    if configured:
        return str(configured)
    if dialed_host.startswith("unix://"):
        return None
    scheme = "tls" if config_get("enable_tls") else "tcp"
    return f"{scheme}://{_bracket(dialed_host)}:0"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _merge_paths(client_paths: list[str]) -> list[str]:
    """The client's `sys.path` entries that exist here, then this process's own."""
    merged = [p for p in client_paths if p == "" or os.path.isdir(p)]
    merged += [p for p in sys.path if p not in merged]
    return merged


def _hostname() -> str:
    import socket

    return socket.gethostname()

