"""Distributed tensors and actors: shards as endpoint arguments, rref, FIFO order."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import monarch
from monarch.actor import Actor, current_rank, endpoint
from monarch.mesh_controller import RemoteException


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

    @endpoint(propagate="inspect")
    def absorb(self, t: torch.Tensor) -> None:
        self.log.append(("absorb", t.tolist()))


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
    # A local tensor gives no mesh: with none active either, the error says what to do.
    with pytest.raises(ValueError, match=r"no mesh is active .* `with mesh\.activate\(\):`"):
        holder.scaled.rref(torch.ones(1))
    with mesh2.activate(), pytest.raises(ValueError, match="propagate"):
        holder.plain.rref()


def test_rref_of_an_inspect_endpoint_runs_it_in_order_and_gives_none(mesh2: Any) -> None:
    holder = mesh2.spawn("holder_inspect", Holder)
    with mesh2.activate():
        x = torch.ones(2)
        assert holder.absorb.rref(x) is None
        x.add_(1)  # after the call in stream order: the actor saw the ones
        holder.note.broadcast(1)
        hist = holder.history.call().get(timeout=30)
    assert [log for _, log in hist.items()] == [[("absorb", [1.0, 1.0]), ("note", 1)]] * 2


class Linear(Actor):
    """getting_started.py's LinearActor, with a weight each rank can recompute."""

    def __init__(self) -> None:
        self.w = _linear_weight(current_rank()["gpus"])

    @endpoint(propagate=lambda x: x)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


def _linear_weight(rank: int) -> torch.Tensor:
    # Half negative, so the relu after the call changes the values.
    return torch.arange(9.0).reshape(3, 3) - 4.0 + rank


def test_rref_outside_activate_puts_result_on_its_tensor_arguments_mesh(mesh2: Any) -> None:
    # getting_started.py's shape: the tensor is made under activate(), the rref call and the
    # op on its result outside it.
    linear = mesh2.spawn("gs_linear", Linear)
    with mesh2.activate():
        t = torch.rand(3, 3)
    o = torch.relu(linear.forward.rref(t))
    assert isinstance(o, monarch.Tensor)
    for g in range(2):
        local = monarch.fetch_shard(t, gpus=g).get(timeout=30)
        got = monarch.fetch_shard(o, gpus=g).get(timeout=30)
        assert torch.allclose(got, torch.relu(local @ _linear_weight(g)))


# ---- Monarch's getting-started flow: distributed tensors as endpoint arguments ---------------
class Trainer(Actor):
    """Receives shards like the getting-started walk-through's trainers."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @endpoint
    def step(self, t: torch.Tensor) -> tuple[str, list[Any], int]:
        return type(t).__name__, t.tolist(), current_rank().rank

    @endpoint
    def nested(self, a: Any, b: Any, *, key: Any = None) -> Any:
        def desc(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                assert type(x) is torch.Tensor
                return ("T", x.tolist())
            if isinstance(x, dict):
                return {k: desc(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return (type(x).__name__, [desc(v) for v in x])
            return x
        return desc(a), desc(b), desc(key)

    @endpoint
    def scale_in_place(self, t: torch.Tensor, k: float) -> None:
        t.mul_(k)

    @endpoint
    def record(self, t: torch.Tensor) -> None:
        self.seen.append(t.tolist())

    @endpoint
    def seen_so_far(self) -> list[Any]:
        return self.seen

    @endpoint
    def boom(self, t: torch.Tensor) -> None:
        raise ValueError(f"trainer refused {t.tolist()}")


class Keeper(Actor):
    """Takes a constructor argument."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _values(vm: Any) -> list[Any]:
    return [v for _, v in vm.items()]


def test_getting_started_shards_reach_actors_spawned_before_and_after_activate(mesh2: Any) -> None:
    before = mesh2.spawn("gs_before", Trainer)
    with mesh2.activate():
        after = mesh2.spawn("gs_after", Trainer)
        t = torch.rand(3, 4)
        dist = t @ t.T
        local = [monarch.inspect(dist, gpus=g).tolist() for g in range(2)]
        # Temporaries (dist[0]) are dropped right after the call: their values must survive
        # until the actors took them (this failed with "Tensor N has no value on rank 1").
        for _ in range(3):
            for actors in (before, after):
                got = _values(actors.step.call(dist[0]).get(timeout=30))
                assert [g[0] for g in got] == ["Tensor", "Tensor"]
                assert [g[2] for g in got] == [0, 1]
                assert [g[1] for g in got] == [local[0][0], local[1][0]]
        full = _values(after.step.call(dist).get(timeout=30))
        assert [g[1] for g in full] == local


def test_views_nested_arguments_and_kwargs(mesh2: Any) -> None:
    tr = mesh2.spawn("gs_nested", Trainer)
    with mesh2.activate():
        r = mesh2.rank_tensor("gpus").to(torch.float32)
        x = torch.arange(6.0).reshape(2, 3) + r * 10
        col = _values(tr.step.call(x[:, 1]).get(timeout=30))
        assert [g[1] for g in col] == [[1.0, 4.0], [11.0, 14.0]]
        tt = _values(tr.step.call(x.T).get(timeout=30))
        assert tt[1][1] == [[10.0, 13.0], [11.0, 14.0], [12.0, 15.0]]
        got = _values(tr.nested.call([x[0], {"k": x[1]}], (x[0, 0], 5),
                                     key={"z": [x[1, 2]]}).get(timeout=30))
    assert got[1] == (
        ("list", [("T", [10.0, 11.0, 12.0]), {"k": ("T", [13.0, 14.0, 15.0])}]),
        ("tuple", [("T", 10.0), 5]),
        {"z": ("list", [("T", 15.0)])},
    )
    assert got[0][1] == ("tuple", [("T", 0.0), 5])


def test_single_actor_adverbs_and_broadcast(mesh2: Any) -> None:
    tr = mesh2.spawn("gs_adverbs", Trainer)
    with mesh2.activate():
        r = mesh2.rank_tensor("gpus").to(torch.float32)
        x = torch.ones(2) + r
        # call_one on a slice of the actor mesh (torchmonarch 0.7.0 hangs here)
        assert tr.slice(gpus=1).step.call_one(x).get(timeout=30) == ("Tensor", [2.0, 2.0], 0)
        assert _values(tr.slice(gpus=0).step.call(x).get(timeout=30))[0][1] == [1.0, 1.0]
        kind, value, _ = tr.step.choose(x).get(timeout=30)
        assert kind == "Tensor" and value in ([1.0, 1.0], [2.0, 2.0])
        streamed = sorted(f.get(timeout=30)[1] for f in tr.step.stream(x))
        assert streamed == [[1.0, 1.0], [2.0, 2.0]]
        tr.record.broadcast(x)
        x.add_(5)  # issued after the broadcast: the actors saw the value before it
        assert _values(tr.seen_so_far.call().get(timeout=30)) == [[[1.0, 1.0]], [[2.0, 2.0]]]


def test_stream_order_around_the_actor_call(mesh2: Any) -> None:
    """The actor sees every operation issued before the call; operations issued after it see
    what the endpoint did to its arguments (the stream waits for the endpoint)."""
    tr = mesh2.spawn("gs_order", Trainer)
    with mesh2.activate():
        y = torch.zeros(2)
        y.add_(1)
        fut = tr.scale_in_place.call(y, 10.0)  # not waited for before the next op
        z = y + 1
        assert monarch.inspect(z).tolist() == [11.0, 11.0]
        fut.get(timeout=30)
        assert monarch.inspect(y, gpus=1).tolist() == [10.0, 10.0]


def test_actor_errors_and_poisoned_arguments_are_remote_exceptions(mesh2: Any) -> None:
    tr = mesh2.spawn("gs_errors", Trainer)
    fail = monarch.remote("tests.tensor.remote_fns.fail_always", propagate=lambda x: x)
    with mesh2.activate():
        x = torch.ones(1)
        with pytest.raises(RemoteException, match=r"trainer refused \[1.0\]"):
            tr.boom.call(x).get(timeout=30)
        bad = fail(x)
        with pytest.raises(RemoteException, match="remote function failed on purpose"):
            tr.step.call(bad).get(timeout=30)
        tr.boom.broadcast(x)  # the reply is dropped; the actors live on
        assert monarch.inspect(x + 1).tolist() == [2.0]
        assert len(_values(tr.step.call(x).get(timeout=30))) == 2


def test_tensors_of_another_mesh_or_slice_are_refused(mesh2: Any, mesh4: Any) -> None:
    here = mesh2.spawn("gs_here", Trainer)
    there = mesh4.spawn("gs_there", Trainer)
    with mesh2.activate():
        x = torch.ones(2)
        with pytest.raises(ValueError, match="must be located on the same process as the actor"):
            there.step.call(x)
        part = x.slice_mesh(gpus=0)
        with pytest.raises(ValueError, match="has no value"):
            here.step.call(part)
        assert here.slice(gpus=0).step.call_one(part).get(timeout=30)[1] == [1.0, 1.0]
        with pytest.raises(TypeError, match="only be sent as an argument of an actor endpoint"):
            mesh2.spawn("gs_spawn_arg", Keeper, x)
