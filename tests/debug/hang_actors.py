"""Actors for the hang-triage tests (importable by procs): ranks that block in named functions
until released, so their stacks show where they wait."""

from __future__ import annotations

import threading

from monarch.actor import Actor, current_rank, endpoint

# One per proc: set by Releaser.release (another actor mesh on the same proc), waited on by the
# blocking functions below; bounded so a test that fails cannot hang its procs.
_go = threading.Event()


def all_reduce() -> None:
    _go.wait(timeout=60)


def load_batch() -> None:
    _go.wait(timeout=60)


class Trainer(Actor):
    """`step(slow_rank)`: every rank blocks in `all_reduce`, except `slow_rank` in
    `load_batch`."""

    @endpoint
    def step(self, slow_rank: int) -> int:
        rank = current_rank().rank
        if rank == slow_rank:
            load_batch()
        else:
            all_reduce()
        return rank


class Releaser(Actor):
    @endpoint
    def release(self) -> None:
        _go.set()

    @endpoint
    def reset(self) -> None:
        _go.clear()
