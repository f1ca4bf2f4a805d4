"""The `HostAgent` protocol, and the registry of the host agents this process's meshes use.

A `HostMesh` delegates all its work to a host agent from the hosts layer: `LocalHostAgent`
(`this_host()`, a fork server on this machine) or `RemoteHostAgent` (hosts attached with
`attach_to_workers` / `hosts_from_dask`). `HostAgent` is everything `host_mesh.py` and the
observers (admin, debug, notebook) may call on one; both agents satisfy it (mypy checks it).

The registry answers "which host agents are live in this process, and what runs on them"
without knowing the hosts layer: an agent registers itself when it starts serving meshes (the
local agent when it is made, a remote agent once one of its hosts is attached) and is forgotten
when it is stopped for good (closed, shut down). Queries:

* `agents()`: the live agents, in registration order (the local agent first once made);
* `agent.snapshot()`: its live proc tables, each with the host of every rank (`PlacedTable`);
* `agent.live_addresses()`: the addresses of its procs that are up.

The hosts a server process lends to remote clients (`hosts/served.py`) are not registered: their
procs belong to the client, which sees them through its own `RemoteHostAgent`.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from monarch._src.mesh.proc_mesh import ProcTable

__all__ = ["HostAgent", "PlacedTable", "agents", "forget", "register"]


class PlacedTable(NamedTuple):
    """One live proc table of a host agent, and where its procs run."""

    table: ProcTable
    hosts: tuple[str, ...]  # the host (name or address) of each rank, in rank order


class HostAgent(Protocol):
    """Starts and stops procs on the hosts of a host mesh.

    Methods returning a `concurrent.futures.Future` never block; they run on any thread but the
    runtime loop.
    """

    @property
    def is_local(self) -> bool:
        """True for this machine's hosts: paths given for them (`with_python_executable`) can be
        checked here."""
        ...

    def spawn_procs(
        self, hosts: list[int], per_host: int, bootstrap: Callable[[], Any] | None, *,
        python: str | None = None, proc_bind: list[dict[str, str]] | None = None,
        commands: list[Any] | None = None,
    ) -> ProcTable:
        """Start `per_host` procs on each of `hosts` (ranks), host-major; never blocks. With
        `python`, each proc runs that interpreter (`HostMesh.with_python_executable`); with
        `proc_bind` (one entry per proc of a host), each proc is pinned to those CPUs; with
        `commands` (one `BootstrapCommand` per proc, host-major), each proc is started by its
        command (`spawn_procs(bootstrap_command=...)`): TypeError for one that is not."""
        ...

    def connected(self) -> concurrent.futures.Future[None]:
        """Completes once every host is reachable; fails naming one that is not."""
        ...

    def stop_procs(self, table: ProcTable, reason: str) -> concurrent.futures.Future[None]:
        """Stop the procs of `table` (their actors' `__cleanup__` runs); stopped is not failed."""
        ...

    def stop_all(self) -> concurrent.futures.Future[None]:
        """Stop every proc started through this agent; the hosts stay usable."""
        ...

    def shutdown(self) -> concurrent.futures.Future[None]:
        """Stop every proc and release the hosts (`HostMesh.shutdown`)."""
        ...

    def set_log_level(self, table: ProcTable, level: int) -> concurrent.futures.Future[None]:
        """Set the Python logging level in every live proc of `table`."""
        ...

    def flush_logs(self, tables: list[ProcTable] | None = None) -> concurrent.futures.Future[None]:
        """Return once every line the procs wrote so far reached this process's output."""
        ...

    def snapshot(self) -> list[PlacedTable]:
        """The proc tables not yet stopped, with the host of each rank (any thread)."""
        ...

    def live_addresses(self) -> list[str]:
        """The addresses of the procs that are up (any thread)."""
        ...


_lock = threading.Lock()
_agents: list[HostAgent] = []


def register(agent: HostAgent) -> None:
    """Make `agent` visible to `agents()` (idempotent; called by the agent itself)."""
    with _lock:
        if not any(a is agent for a in _agents):
            _agents.append(agent)


def forget(agent: HostAgent) -> None:
    """Remove `agent` from the registry once it is stopped for good (idempotent)."""
    with _lock:
        _agents[:] = [a for a in _agents if a is not agent]


def agents() -> list[HostAgent]:
    """The live host agents of this process, in registration order (a copy; any thread)."""
    with _lock:
        return list(_agents)
