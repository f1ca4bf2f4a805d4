"""Names of `monarch.actor` whose features arrive with later work (gateways, debugging).

Each raises `NotImplementedError` saying what to use instead; none pretends to work.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["attach", "debug_controller"]


def _missing(name: str, instead: str) -> NoReturn:
    raise NotImplementedError(f"monarch.actor.{name} is not available in this version. {instead}")


def attach(addr: str) -> Any:
    """Bootstrap through a remote gateway (arrives with Dask-cluster hosts)."""
    _missing("attach", "Run the client on a machine of the cluster.")


def debug_controller() -> Any:
    """The distributed debugger's controller (arrives with the debugging work)."""
    _missing("debug_controller", "Use logging or print inside endpoints for now.")
