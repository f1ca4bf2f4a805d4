"""Distributed tensors and actors: shards as endpoint arguments, rref, FIFO order."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import monarch
from monarch.actor import Actor, current_rank, endpoint


class Holder(Actor):
    """Records what it is sent, in order."""

    def __init__(self) -> None:
        self.log: list[Any] = []

    @endpoint
    def take(self, t: torch.Tensor) -> float:
        assert type(t) is torch.Tensor  # the local shard, not a proxy
        self.log.append(("take", t.tolist()))
        return float(t.sum())

    @endpoint
    def note(self, x: int) -> None:
        self.log.append(("note", x))

    @endpoint(propagate=lambda t: torch.empty(t.shape))
    def scaled(self, t: torch.Tensor) -> torch.Tensor:
        self.log.append(("scaled", t.tolist()))
        return t * (current_rank()["gpus"] + 10)

    @endpoint
    def history(self) -> list[Any]:
        return self.log

    @endpoint
    def plain(self) -> int:
        return 1


def test_tensor_argument_arrives_as_local_shard(mesh2: Any) -> None:
    holder = mesh2.spawn("holder_shard", Holder)
    with mesh2.activate():
        r = mesh2.rank_tensor("gpus").to(torch.float32) + torch.zeros(2)
        r.add_(1)  # issued before the call: the actor sees its effect
        vm = holder.take.call(r).get(timeout=30)
    assert [v for _, v in vm.items()] == [2.0, 4.0]


def test_rref_keeps_result_on_workers_and_fifo_with_plain_calls(mesh2: Any) -> None:
    holder = mesh2.spawn("holder_rref", Holder)
    with mesh2.activate():
        x = torch.ones(2)
        holder.note.broadcast(1)
        y = holder.scaled.rref(x)
        holder.note.broadcast(2)
        z = y + 1
        holder.take.call(z).get(timeout=30)
        holder.note.broadcast(3)
        got = [monarch.inspect(z, gpus=g) for g in range(2)]
        hist = holder.history.call().get(timeout=30)
    assert [v.tolist() for v in got] == [[11.0, 11.0], [12.0, 12.0]]
    kinds = [[k for k, _ in log] for _, log in hist.items()]
    assert kinds == [["note", "scaled", "note", "take", "note"]] * 2


def test_rref_needs_propagate_and_active_mesh(mesh2: Any) -> None:
    holder = mesh2.spawn("holder_bad", Holder)
    with pytest.raises(ValueError, match="active mesh"):
        holder.scaled.rref(torch.ones(1))
    with mesh2.activate(), pytest.raises(ValueError, match="propagate"):
        holder.plain.rref()
