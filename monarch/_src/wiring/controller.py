"""The controller's wiring: what a controller process installs into the lower layers' hook slots.

Imported by `monarch.actor` (and so by everything that imports it). Installing is cheap: each
slot gets a small function that imports its feature on first use, so importing this module
imports neither torch nor the tensor engine.
"""

from __future__ import annotations

from typing import Any, Callable

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
    hooks.fault_hook.install(_fault_hook)


def _rref(endpoint: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`Endpoint.rref`: the tensor engine's (imported on first use: it imports torch)."""
    from monarch._src.tensor.actor_calls import endpoint_rref

    return endpoint_rref(endpoint, args, kwargs)


def _mesh_engine(proc_mesh: Any) -> Any:
    """The tensor engine of `proc_mesh` (imported on first use: it imports torch)."""
    from monarch._src.tensor.engine import engine_for

    return engine_for(proc_mesh)


def _fault_hook() -> Callable[[Any], None]:
    """The facade's current `unhandled_fault_hook` (users may reassign it at any time)."""
    import monarch.actor

    hook: Callable[[Any], None] = getattr(monarch.actor, "unhandled_fault_hook")
    return hook
