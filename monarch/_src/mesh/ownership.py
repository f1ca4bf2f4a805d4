"""This process's ownership tree (see `supervision/tree.py`): the meshes spawned here, by whom,
and the health of their ranks. The meshes layer records spawns and stops in it; the proc agent
asks it whether a reported failure is to be delivered, and to whom."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

from monarch._src.supervision.tree import ROOT, OwnershipTree

T = TypeVar("T")

__all__ = ["ROOT", "after", "owner_key", "tree"]

tree = OwnershipTree()


def after(
    done: concurrent.futures.Future[T], forget: Callable[[], None]
) -> concurrent.futures.Future[T]:
    """A future with `done`'s outcome, completed only once `forget()` ran (when `done` is
    done): whoever waits for a stop sees the records of the stopped mesh already dropped."""
    out: concurrent.futures.Future[T] = concurrent.futures.Future()

    def settle(_: concurrent.futures.Future[T]) -> None:
        try:
            forget()
        finally:
            error = done.exception()
            if error is not None:
                out.set_exception(error)
            else:
                out.set_result(done.result())

    done.add_done_callback(settle)
    return out


def owner_key(actor_key: str | None) -> str:
    """The tree's name for a spawner: its actor key, or ROOT for the root client."""
    return ROOT if actor_key is None else actor_key
