"""Hosts from a Dask cluster: one monarch host per machine, installed by a worker plugin.

This module (with `transport/` and `job/dask_job.py`) is the only place that imports
`distributed`: here for its `Client`, `WorkerPlugin`, `Worker` and the scheduler's event topics.

`hosts_from_dask(target)` connects to the cluster (a `Client`, a scheduler address, or any
cluster manager with a `scheduler_address`: `LocalCluster`, dask-jobqueue, dask-kubernetes, a
gateway cluster), registers `MonarchHostPlugin` on its workers, and picks one worker per
machine (the lowest worker address of each host IP, so the choice is deterministic). On each
picked worker the plugin starts a `HostServer` (`hosts/served.py`) inside the worker's process,
listening on the worker's own IP; the servers' addresses are attached with the same agent as
`attach_to_workers`. The scheduler's `remove-worker` event for a picked worker makes the host
lost at once (a supervision event for each rank on it); heartbeats catch the rest.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from typing import Any

from distributed import Client, Worker, WorkerPlugin

from monarch._src.config import configure, duration_seconds, parse_transport
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.runtime.runtime import get_runtime, runtime_if_started

__all__ = ["MonarchHostPlugin", "hosts_from_dask", "run_dask_worker"]

PLUGIN_NAME = "monarch-host"

_server_lock = threading.Lock()
_server: Any = None  # the HostServer of this (Dask worker) process, once started
# Dask worker address -> its host, a `monarch worker` subprocess, for Dask workers living in a
# process that already runs monarch (where a HostServer cannot share the runtime).
_subprocess_hosts: dict[str, Any] = {}


class MonarchHostPlugin(WorkerPlugin):
    """Worker plugin that can turn its Dask worker's process into a monarch host."""

    name = PLUGIN_NAME

    def setup(self, worker: Worker) -> None:
        """Remember the worker; the host starts when a client picks this worker."""
        self.worker = worker

    def teardown(self, worker: Worker) -> None:
        """When the worker closes, stop the procs its host started."""
        status = str(getattr(worker, "status", ""))
        if "clos" not in status:
            return  # the plugin is being replaced; the host keeps serving
        workers = _subprocess_hosts.pop(worker.address, None)
        if workers is not None:
            workers.close()
        if _server is not None:
            _server.agent.close()


async def _start_host(dask_worker: Worker) -> str:
    """Run on a picked Dask worker (through `Client.run`): start its host, return its address.

    The host lives in the worker's process. A worker inside a process that already runs
    monarch (a `LocalCluster(processes=False)` in the client itself) cannot also host there:
    its host is a `monarch worker` subprocess instead, ended with the worker (or the process).
    """
    global _server
    if PLUGIN_NAME not in dask_worker.plugins:
        raise RuntimeError(f"the monarch worker plugin is not installed on {dask_worker.address}")
    with _server_lock:
        if _server is not None:
            return str(_server.address)
        rt = runtime_if_started()
        if rt is None:
            from monarch._src.hosts.served import HostServer

            host = _worker_host(dask_worker.address)
            bracketed = f"[{host}]" if ":" in host else host
            configure(default_transport=parse_transport(f"tcp://{bracketed}:0"))
            _server = HostServer(get_runtime(), exit_on_shutdown=False)
            return str(_server.address)
    from monarch._src.hosts.local_workers import LocalWorkers

    workers = _subprocess_hosts.get(dask_worker.address)
    if workers is None:
        host = rt.address.partition("://")[2].rpartition(":")[0].strip("[]") or "127.0.0.1"
        workers = _subprocess_hosts[dask_worker.address] = LocalWorkers(1, host)
    address = await asyncio.wrap_future(workers.futures()[0])
    return str(address)


def _worker_host(address: str) -> str:
    """The IP a Dask worker listens on (`tcp://ip:port`); loopback for other schemes."""
    scheme, _, rest = address.partition("://")
    host = rest.rpartition(":")[0].strip("[]")
    return host if scheme in ("tcp", "tls") and host else "127.0.0.1"


def _client_for(target: Any) -> tuple[Client, bool]:
    """(client, whether we own it) for a Client, an address or a cluster manager."""
    timeout = duration_seconds("mesh_attach_config_timeout")
    if isinstance(target, Client):
        return target, False
    if isinstance(target, str):
        return _new_client(target, timeout), True
    address = getattr(target, "scheduler_address", None)
    if isinstance(address, str):
        return _new_client(address, timeout), True
    raise TypeError(
        "hosts_from_dask takes a distributed.Client, a scheduler address such as "
        "'tcp://10.0.0.1:8786', or a cluster manager with a scheduler_address (LocalCluster, "
        f"SLURMCluster, KubeCluster, ...); got {type(target).__name__}."
    )


def _new_client(address: str, timeout: float) -> Client:
    client: Client = Client(  # type: ignore[no-untyped-call]  # distributed is untyped here
        address, set_as_default=False, timeout=timeout)
    return client


def _host_key(host: str) -> tuple[int, Any]:
    try:
        return (0, ipaddress.ip_address(host))
    except ValueError:
        return (1, host)


def pick_workers(workers: dict[str, dict[str, Any]]) -> list[str]:
    """One worker per machine: the lowest address of each host, hosts in address order."""
    by_host: dict[str, str] = {}
    for addr, info in workers.items():
        host = str(info.get("host") or _worker_host(addr))
        if host not in by_host or addr < by_host[host]:
            by_host[host] = addr
    return [by_host[h] for h in sorted(by_host, key=_host_key)]


def hosts_from_dask(target: Any, *, name: str | None = None) -> HostMesh:
    """A host mesh with one host per machine of a Dask cluster (dimension `hosts`).

    `target` is a `distributed.Client`, a scheduler address, or a cluster manager. A client
    made here is closed when the host mesh shuts down; a given one is left open.
    """
    from monarch._src.hosts.remote import _attach  # (remote imports this module lazily)

    client, own = _client_for(target)
    topics: list[str] = []
    try:
        client.wait_for_workers(1, timeout=duration_seconds("host_spawn_ready_timeout"))
        client.register_plugin(MonarchHostPlugin(), name=PLUGIN_NAME)
        picked = pick_workers(client.scheduler_info(n_workers=-1)["workers"])
        addresses = client.run(_start_host, workers=picked)
    except BaseException as exc:
        if own:
            client.close()  # type: ignore[no-untyped-call]  # distributed is untyped here
        if isinstance(exc, (TypeError, ValueError, RuntimeError)):
            raise
        raise RuntimeError(
            f"hosts_from_dask could not start monarch hosts on the Dask cluster at "
            f"{client.scheduler.address if client.scheduler else target!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    holder: dict[str, Any] = {}

    def on_event(worker: str, host_addr: str) -> Any:
        def handler(event: tuple[float, dict[str, Any]]) -> None:
            msg = event[1] if isinstance(event, tuple) else event
            if isinstance(msg, dict) and msg.get("action") == "remove-worker":
                agent = holder.get("agent")
                if agent is not None:
                    agent.lost_by_address(
                        host_addr, f"the Dask scheduler removed its worker {worker} "
                                   f"({msg.get('reason', 'no reason given')})")
        return handler

    for worker in picked:
        client.subscribe_topic(  # type: ignore[no-untyped-call]  # distributed: untyped
            worker, on_event(worker, addresses[worker]))
        topics.append(worker)

    def cleanup() -> None:
        for topic in topics:
            try:
                client.unsubscribe_topic(topic)  # type: ignore[no-untyped-call]  # untyped
            except Exception:  # the scheduler may be gone already
                pass
        if own:
            client.close()  # type: ignore[no-untyped-call]  # distributed is untyped here

    mesh = _attach([addresses[w] for w in picked], name, on_shutdown=cleanup)
    holder["agent"] = mesh.agent
    return mesh


def run_dask_worker(scheduler: str, *, host: str | None = None, nthreads: int = 1) -> int:
    """Run a Dask worker with the monarch plugin until it closes (`monarch worker
    --dask-scheduler`); returns the exit status."""

    async def main() -> None:
        async with Worker(scheduler, host=host, nthreads=nthreads,
                          plugins=(MonarchHostPlugin(),)) as worker:
            await worker.finished()

    asyncio.run(main())
    return 0
