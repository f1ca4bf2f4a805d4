"""Remote hosts, the public entry points: host meshes over monarch hosts on other machines.

* `attach_to_workers(ca=..., workers=[...])`: a `HostMesh` (dimension `hosts`) over processes
  running `run_worker_loop_forever` (or `run_worker_loop_until_shutdown`, which returns after the
  shutdown, or `start_worker_loop_forever`, which returns a Future at once) / `monarch worker`,
  driven by a `RemoteHostAgent` (`hosts/remote_agent.py`); the worker side is `HostServer`
  (`hosts/served.py`).
* `hosts_from_dask(target)`: one host per machine of a Dask cluster (`hosts/dask.py`).
* `hosts_from_config(name)`: a scheduler address from the environment or config file, else a
  stand-in of two local worker processes (`hosts/local_workers.py`).

A remote host must be able to reach this client: a client listening on loopback can only use
hosts on loopback; `enable_transport("tcp")` (or an explicit `"tcp://ip:0"`) before monarch
starts makes it listen on a routable address.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from monarch._src.config import ChannelTransport, configure, parse_transport
from monarch._src.hosts.addresses import TRUST_ALL, check_ca, dial_address, parse_worker_address
from monarch._src.hosts.bootstrap_command import BootstrapCommand, default_bootstrap_cmd
from monarch._src.hosts.local_workers import LocalWorkers
from monarch._src.hosts.remote_agent import RemoteHostAgent
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.runtime.future import Future, loop_running_here
from monarch._src.runtime.runtime import get_runtime, runtime_if_started
from monarch._src.shape import Shape, Slice

__all__ = [
    "TRUST_ALL",
    "BootstrapCommand",
    "LocalWorkers",
    "RemoteHostAgent",
    "attach_to_workers",
    "default_bootstrap_cmd",
    "hosts_from_config",
    "hosts_from_dask",
    "parse_worker_address",
    "run_worker_loop_forever",
    "run_worker_loop_until_shutdown",
    "start_worker_loop_forever",
]



def attach_to_workers(
    *,
    ca: str,
    workers: Sequence[Any],
    private_key: Any = None,
    name: str | None = None,
) -> HostMesh:
    """A host mesh (one dimension, `hosts`) over running worker hosts; never blocks.

    `workers` are addresses (`tcp://host:port`, or `ipc:///path` on this machine) of processes
    running
    `run_worker_loop_forever` / `monarch worker`, or futures of them. Only
    `ca="trust_all_connections"` is accepted (use `enable_tls` for TLS). `HostMesh.initialized`
    raises naming a host that could not be attached.
    """
    check_ca(ca, private_key, "attach_to_workers")
    if isinstance(workers, (str, bytes)) or not isinstance(workers, Sequence):
        raise TypeError("attach_to_workers: workers must be a list of addresses such as "
                        f"['tcp://10.0.0.5:26600']; got {type(workers).__name__}.")
    if not workers:
        raise ValueError("attach_to_workers: workers is empty; give at least one address.")
    for w in workers:
        if isinstance(w, str):
            parse_worker_address(w)
    return _attach(list(workers), name)


def _attach(targets: list[Any], name: str | None,
            on_shutdown: Callable[[], None] | None = None) -> HostMesh:
    agent = RemoteHostAgent(get_runtime(), targets, name, on_shutdown)
    shape = Shape(["hosts"], Slice.new_row_major([len(targets)]))
    return HostMesh.from_agent(agent, shape, True)


def _serve(ca: str, address: str, private_key: Any, what: str) -> Any:
    """Make this process a host listening at `address`; returns the `HostServer`."""
    check_ca(ca, private_key, what)
    scheme, host, port = parse_worker_address(address, what=what, wildcard=True)
    if runtime_if_started() is not None:
        raise RuntimeError(
            f"{what} must be the first monarch call of its process: this "
            "process's runtime already started, so it cannot listen at "
            f"{address!r}. Run it in a process of its own (e.g. `monarch worker`)."
        )
    if scheme == "unix":
        # The server listens on a socket of its own and `address` names it (a symlink): the
        # procs it starts reach it at its own path, so removing the public one (Monarch's tests
        # do, to check that an attached client never dials it again) cuts no proc off.
        _claim_socket_path(host, address, what)
        configure(default_transport=ChannelTransport.Unix)
    else:
        configure(default_transport=parse_transport(dial_address(scheme, host, port)))
    from monarch._src.hosts.served import HostServer

    server = HostServer(get_runtime(), exit_on_shutdown=True)
    if scheme == "unix":
        own = server.address[len("unix://"):]
        os.symlink(own, host)
        atexit.register(_remove_link, host, own)
    return server


def _claim_socket_path(path: str, address: str, what: str) -> None:
    """Free `path` for a worker's socket: a stale file (nothing listens) is removed; RuntimeError
    if a worker listens there."""
    if not os.path.lexists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # left by a worker that is gone
        return
    finally:
        probe.close()
    raise RuntimeError(f"{what}: a worker already listens at {address!r}; give another path.")


def _remove_link(path: str, target: str) -> None:
    try:
        if os.readlink(path) == target:
            os.unlink(path)
    except OSError:
        pass  # removed already (by whoever took the path over, or by hand)


def start_worker_loop_forever(*, ca: str, address: str, private_key: Any = None) -> Future[None]:
    """Start serving as a host at `address` and return at once.

    The returned Future resolves when a client shuts the host mesh down (`HostMesh.shutdown`);
    discarding it does not stop the server. Same arguments as `run_worker_loop_forever`.
    """
    server = _serve(ca, address, private_key, "start_worker_loop_forever")
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def wait() -> None:
        server.exited.wait()
        done.set_result(None)

    threading.Thread(target=wait, name="monarch-worker-loop", daemon=True).start()
    return Future.from_concurrent(done)


def run_worker_loop_forever(*, ca: str, address: str, private_key: Any = None) -> None:
    """Turn this process into a host: serve one client at a time at `address`; blocks.

    A client that disconnects (or stops answering for `host_heartbeat_timeout`) has its procs
    stopped, then the next client is served. Returns when a client shuts the host mesh down.
    """
    server = _serve(ca, address, private_key, "run_worker_loop_forever")
    while not server.exited.wait(timeout=1.0):
        pass


def run_worker_loop_until_shutdown(*, ca: str, address: str, private_key: Any = None) -> None:
    """Serve as a host at `address` until a client shuts the host mesh down, then return.

    Unlike a `monarch worker`, the process goes on afterwards (its procs are stopped); the
    runtime keeps running, so the same process cannot serve again.
    """
    if loop_running_here():
        raise RuntimeError(
            "run_worker_loop_until_shutdown() blocks until the host is shut down and cannot be "
            "called from a running event loop; call it from synchronous code, or use "
            "start_worker_loop_forever() and await its Future."
        )
    start_worker_loop_forever(ca=ca, address=address, private_key=private_key).get()


def hosts_from_dask(target: Any, *, name: str | None = None) -> HostMesh:
    """A host mesh with one host per machine of a Dask cluster (dimension `hosts`).

    `target` is a `distributed.Client`, a scheduler address (`tcp://host:8786`) or a cluster
    manager such as `LocalCluster`; see `monarch._src.hosts.dask`.
    """
    from monarch._src.hosts.dask import hosts_from_dask as _from_dask

    return _from_dask(target, name=name)


def hosts_from_config(name: str) -> HostMesh:
    """Hosts named by the environment variable (or config file key) `name`.

    Its value is a Dask scheduler address (`tcp://host:8786`): one host per machine of that
    cluster (see `hosts_from_dask`). Without one, a stand-in of two local worker processes,
    stopped when the host mesh shuts down or monarch exits.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"hosts_from_config takes the name of an environment variable such as "
                        f"'MONARCH_HOSTS'; got {name!r}.")
    address = os.environ.get(name) or _from_config_file(name)
    if address:
        return hosts_from_dask(address, name=name)
    workers = LocalWorkers(2)
    try:
        return _attach(list(workers.futures()), name, on_shutdown=workers.close)
    except BaseException:
        workers.close()
        raise


def _from_config_file(name: str) -> str | None:
    """`name` as a key of the `[hosts]` table in the file named by MONARCH_CONFIG_FILE."""
    path = os.environ.get("MONARCH_CONFIG_FILE")
    if not path or not os.path.exists(path):
        return None
    data = _load_toml(path)
    value = data.get("hosts", {}).get(name)
    return str(value) if value else None


def _load_toml(path: str) -> dict[str, Any]:
    """The TOML document at `path` (Python 3.11+: tomllib)."""
    if sys.version_info >= (3, 11):
        import tomllib

        with open(path, "rb") as f:
            return tomllib.load(f)
    raise RuntimeError(f"reading the [hosts] table of {path} needs Python 3.11+ (tomllib)")
