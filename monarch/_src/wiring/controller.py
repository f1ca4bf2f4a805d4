"""The controller's wiring: what a controller process installs into the lower layers' hook slots.

Imported by `monarch.actor` (and so by everything that imports it). Installing is cheap: each
slot gets a small function that imports its feature on first use, so importing this module
imports neither torch nor the tensor engine. Two slots are filled by the facades that own what
they return, not here: `fault_hook` by `monarch.actor` (it reads the facade's own
`unhandled_fault_hook`), `workspace_sync` by `monarch.tools.config.workspace` (a `Workspace` can
only exist once that module is imported).

So importing `monarch.actor` (about 0.24 s) imports none of `distributed`, `dask`, `tornado`,
`numpy`, `torch` or `ipywidgets`, and neither does the first spawn over plain tcp (Dask's comm
layer, about 0.4 s, is imported only for a tls://, unix:// or inproc:// address). The facade
also fills the `fault_hook` slot, and under IPython installs the notebook hook.
"""

from __future__ import annotations

from typing import Any

from monarch._src.mesh import hooks

__all__ = ["install"]

_installed = False


def install() -> None:
    """Fill the controller's hook slots (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    hooks.proc_setup.install(("monarch._src.wiring.proc:install",))
    hooks.rref.install(_rref)
    hooks.mesh_engine.install(_mesh_engine)
    hooks.local_host.install(_local_host)
    from monarch._src.debug import agent as debug_agent  # cheap: neither pdb nor torch

    debug_agent.install()  # breakpoint(), post-mortem and stack dumps in this process
    from monarch._src.rdma import readiness  # cheap: neither torch nor sockets until asked

    readiness.install()  # answers `rdma_init`: peers start this process's RDMA manager


def _rref(endpoint: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`Endpoint.rref`: the tensor engine's (imported on first use: it imports torch)."""
    from monarch._src.tensor.actor_calls import endpoint_rref

    return endpoint_rref(endpoint, args, kwargs)


def _mesh_engine(proc_mesh: Any) -> Any:
    """The tensor engine of `proc_mesh` (imported on first use: it imports torch)."""
    from monarch._src.tensor.engine import engine_for

    return engine_for(proc_mesh)


def _local_host() -> Any:
    """This process's local host agent (`this_host()`), made on first use."""
    from monarch._src.hosts.local import local_agent

    return local_agent()
