"""This process's ownership tree (see `supervision/tree.py`): the meshes spawned here, by whom,
and the health of their ranks. The meshes layer records spawns and stops in it; the proc agent
asks it whether a reported failure is to be delivered, and to whom."""

from __future__ import annotations

from monarch._src.supervision.tree import ROOT, OwnershipTree

__all__ = ["ROOT", "owner_key", "tree"]

tree = OwnershipTree()


def owner_key(actor_key: str | None) -> str:
    """The tree's name for a spawner: its actor key, or ROOT for the root client."""
    return ROOT if actor_key is None else actor_key
