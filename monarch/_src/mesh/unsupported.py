"""Names of `monarch.actor` whose features arrive with later work (multi-host, debugging).

Each raises `NotImplementedError` saying what to use instead; none pretends to work.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = [
    "attach",
    "attach_to_workers",
    "debug_controller",
    "default_bootstrap_cmd",
    "hosts_from_config",
    "run_worker_loop_forever",
]


def _missing(name: str, instead: str) -> NoReturn:
    raise NotImplementedError(f"monarch.actor.{name} is not available in this version. {instead}")


def hosts_from_config(name: str) -> Any:
    """Host mesh from a cluster configuration (arrives with Dask-cluster hosts)."""
    _missing("hosts_from_config", "Use this_host().spawn_procs(per_host=...) on this machine.")


def attach_to_workers(*, ca: str, workers: Any, private_key: Any = None, name: Any = None) -> Any:
    """Host mesh over running workers (arrives with Dask-cluster hosts)."""
    _missing("attach_to_workers", "Use this_host() on this machine.")


def run_worker_loop_forever(*, ca: str, address: str, private_key: Any = None) -> Any:
    """Serve as a worker host (arrives with Dask-cluster hosts)."""
    _missing("run_worker_loop_forever", "Use this_host() on this machine.")


def attach(addr: str) -> Any:
    """Bootstrap through a remote gateway (arrives with Dask-cluster hosts)."""
    _missing("attach", "Run the client on a machine of the cluster.")


def debug_controller() -> Any:
    """The distributed debugger's controller (arrives with the debugging work)."""
    _missing("debug_controller", "Use logging or print inside endpoints for now.")


def default_bootstrap_cmd() -> Any:
    """The command that starts a proc (arrives with Dask-cluster hosts)."""
    _missing("default_bootstrap_cmd", "Procs of this_host() are forked by monarch itself.")
