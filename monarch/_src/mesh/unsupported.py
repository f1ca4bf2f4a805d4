"""Names of `monarch.actor` whose features arrive with later work (client gateways).

Each raises `NotImplementedError` saying what to use instead; none pretends to work.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["attach"]


def _missing(name: str, instead: str) -> NoReturn:
    raise NotImplementedError(f"monarch.actor.{name} is not available in this version. {instead}")


def attach(addr: str) -> Any:
    """Bootstrap the client through a remote gateway (not available: no gateway exists yet)."""
    _missing("attach", "Run the client on a machine of the cluster.")

