"""Endpoint adverbs against real worker processes: call, call_one, choose, stream, broadcast,
send with ports, and Accumulator.

Every test spawns fresh actors on the session's shared proc meshes; no test here stops or
damages a proc.
"""

from __future__ import annotations

import operator
from typing import Any

import pytest

from monarch.actor import (
    Accumulator,
    Actor,
    Channel,
    Extent,
    Port,
    ValueMesh,
    current_rank,
    current_size,
    endpoint,
    send,
    this_proc,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0


class Counter(Actor):
    def __init__(self, start: int) -> None:
        self.value_ = start

    @endpoint
    async def incr(self) -> None:
        self.value_ += 1

    @endpoint
    async def value(self) -> int:
        return self.value_


class Ranked(Actor):
    """Reports where each message landed; all endpoints are sync."""

    @endpoint
    def whoami(self) -> int:
        return current_rank().rank

    @endpoint
    def times_ten(self) -> int:
        return current_rank().rank * 10

    @endpoint
    def add(self, a: int, b: int = 0) -> int:
        return a + b + current_rank().rank

    @endpoint
    def run(self, fn: Any) -> Any:
        return fn()

    @endpoint
    def send_range(self, port: Port[int], n: int) -> None:
        for i in range(n):
            port.send(i)


class HoldingReplies(Actor):
    """Answers at once on `fast_rank` and holds every other rank's reply until `flush`."""

    def __init__(self) -> None:
        self._held: list[Port[int]] = []

    @endpoint(explicit_response_port=True)
    def report(self, port: Port[int], fast_rank: int) -> None:
        rank = current_rank().rank
        if rank == fast_rank:
            port.send(rank)
        else:
            self._held.append(port)

    @endpoint
    def flush(self) -> int:
        rank = current_rank().rank
        held, self._held = self._held, []
        for port in held:
            port.send(rank)
        return len(held)


class AsyncRelay(Actor):
    @endpoint
    async def choose_value(self, counter: Counter) -> int:
        return await counter.value.choose()


class SyncRelay(Actor):
    @endpoint
    def choose_value(self, counter: Counter) -> int:
        return counter.value.choose().get(timeout=TIMEOUT)


# --- call -----------------------------------------------------------------------------------


def test_call_four_rank_mesh_returns_value_mesh_in_rank_order(procs4: Any) -> None:
    mesh = procs4.spawn("adv_call_order", Ranked)
    result = mesh.whoami.call().get(timeout=TIMEOUT)
    assert isinstance(result, ValueMesh)
    assert len(result) == 4
    assert result.extent == Extent(["gpus"], [4])
    assert list(result.values()) == [0, 1, 2, 3]
    assert [(point.rank, point["gpus"], value) for point, value in result.items()] == [
        (0, 0, 0),
        (1, 1, 1),
        (2, 2, 2),
        (3, 3, 3),
    ]


def test_call_positional_and_keyword_args_reach_every_rank(procs4: Any) -> None:
    mesh = procs4.spawn("adv_call_args", Ranked)
    result = mesh.add.call(10, b=100).get(timeout=TIMEOUT)
    assert list(result.values()) == [110, 111, 112, 113]


async def test_call_awaited_returns_same_values_as_get(procs2: Any) -> None:
    mesh = procs2.spawn("adv_call_await", Ranked)
    result = await mesh.times_ten.call()
    assert list(result.values()) == [0, 10]


def test_call_on_slice_returns_slice_extent(procs4: Any) -> None:
    mesh = procs4.spawn("adv_call_slice", Ranked)
    result = mesh.slice(gpus=slice(1, 3)).times_ten.call().get(timeout=TIMEOUT)
    assert result.extent == Extent(["gpus"], [2])
    # Ranks are positions within the slice, so the first actor of the slice reports 0.
    assert list(result.values()) == [0, 10]


# --- call_one -------------------------------------------------------------------------------


def test_call_one_single_rank_slice_returns_bare_value(procs4: Any) -> None:
    mesh = procs4.spawn("adv_call_one", Ranked)
    assert mesh.slice(gpus=2).add.call_one(5, b=1).get(timeout=TIMEOUT) == 6


def test_call_one_on_this_proc_returns_bare_value() -> None:
    mesh = this_proc().spawn("adv_call_one_local", Ranked)
    assert mesh.add.call_one(41, b=1).get(timeout=TIMEOUT) == 42


@pytest.mark.parametrize(("sliced", "size"), [(False, 4), (True, 2)])
def test_call_one_multi_actor_mesh_raises_value_error(procs4: Any, sliced: bool, size: int) -> None:
    mesh = procs4.spawn(f"adv_call_one_many_{size}", Ranked)
    target = mesh.slice(gpus=slice(0, 2)) if sliced else mesh
    with pytest.raises(ValueError) as info:
        target.whoami.call_one()
    assert str(info.value) == f"call_one requires exactly 1 actor, but mesh has {size}"


# --- choose ---------------------------------------------------------------------------------


def test_choose_after_broadcast_sees_increment_from_client_and_relays(
    procs2: Any, procs4: Any
) -> None:
    counter = procs2.spawn("adv_choose_counter", Counter, 3)
    counter.incr.broadcast()
    # Same sender, so the broadcast is processed before this choose on whichever rank it lands.
    assert counter.value.choose().get(timeout=TIMEOUT) == 4
    # The relays are other senders: make sure every rank has handled the increment first.
    assert list(counter.value.call().get(timeout=TIMEOUT).values()) == [4, 4]

    async_relay = procs4.spawn("adv_choose_async_relay", AsyncRelay)
    sync_relay = procs4.spawn("adv_choose_sync_relay", SyncRelay)
    assert async_relay.choose_value.choose(counter).get(timeout=TIMEOUT) == 4
    assert sync_relay.choose_value.choose(counter).get(timeout=TIMEOUT) == 4


async def test_choose_awaited_returns_bare_value(procs2: Any) -> None:
    counter = procs2.spawn("adv_choose_await", Counter, 3)
    counter.incr.broadcast()
    assert await counter.value.choose() == 4


def test_choose_many_times_reaches_more_than_one_actor(procs4: Any) -> None:
    mesh = procs4.spawn("adv_choose_spread", Ranked)
    seen = {mesh.whoami.choose().get(timeout=TIMEOUT) for _ in range(40)}
    assert seen <= {0, 1, 2, 3}
    # Uniform choice over 4 ranks hits a single rank 40 times with probability 4**-39.
    assert len(seen) > 1


# --- stream ---------------------------------------------------------------------------------


async def test_stream_sum_of_awaited_futures_totals_all_ranks(procs2: Any) -> None:
    counter = procs2.spawn("adv_stream_sum", Counter, 3)
    counter.incr.broadcast()
    assert sum([await f for f in counter.value.stream()]) == 8


def test_stream_yields_exactly_one_future_per_rank(procs4: Any) -> None:
    mesh = procs4.spawn("adv_stream_count", Ranked)
    futures = list(mesh.times_ten.stream())
    assert len(futures) == 4
    assert sorted(f.get(timeout=TIMEOUT) for f in futures) == [0, 10, 20, 30]


def test_stream_first_future_resolves_to_first_arriving_reply(procs4: Any) -> None:
    mesh = procs4.spawn("adv_stream_arrival", HoldingReplies)
    futures = list(mesh.report.stream(2))
    assert len(futures) == 4
    # Only rank 2 has answered; rank order would have put rank 0 first.
    assert futures[0].get(timeout=TIMEOUT) == 2
    assert sorted(mesh.flush.call().get(timeout=TIMEOUT).values()) == [0, 1, 1, 1]
    assert sorted(f.get(timeout=TIMEOUT) for f in futures[1:]) == [0, 1, 3]


# --- broadcast ------------------------------------------------------------------------------


def test_broadcast_then_call_processes_broadcasts_first(procs4: Any) -> None:
    counter = procs4.spawn("adv_broadcast_fifo", Counter, 3)
    for _ in range(5):
        assert counter.incr.broadcast() is None
    assert list(counter.value.call().get(timeout=TIMEOUT).values()) == [8, 8, 8, 8]


def test_broadcast_to_slice_only_reaches_slice(procs4: Any) -> None:
    counter = procs4.spawn("adv_broadcast_slice", Counter, 0)
    counter.slice(gpus=slice(2, 4)).incr.broadcast()
    assert list(counter.value.call().get(timeout=TIMEOUT).values()) == [0, 0, 1, 1]


def test_broadcast_port_argument_receives_hundred_sends_in_order(procs2: Any) -> None:
    mesh = procs2.spawn("adv_port_hundred", Ranked)
    port, receiver = Channel[int].open()
    mesh.slice(gpus=0).send_range.broadcast(port, 100)
    assert [receiver.recv().get(timeout=TIMEOUT) for _ in range(100)] == list(range(100))


# --- send and ports -------------------------------------------------------------------------


def test_send_with_port_delivers_one_reply_per_rank(procs4: Any) -> None:
    mesh = procs4.spawn("adv_send_port", Ranked)
    port, receiver = Channel.open()
    assert send(mesh.times_ten, (), {}, port=port) is None
    replies = [receiver.recv().get(timeout=TIMEOUT) for _ in range(4)]
    assert sorted(replies) == [0, 10, 20, 30]


def test_send_open_ranked_receiver_pairs_values_with_ranks(procs4: Any) -> None:
    mesh = procs4.spawn("adv_send_ranked", Ranked)
    port, receiver = Channel.open_ranked()
    send(mesh.add, (1,), {"b": 2}, port=port)
    replies = [receiver.recv().get(timeout=TIMEOUT) for _ in range(4)]
    assert sorted((rank, value) for rank, value in replies) == [(0, 3), (1, 4), (2, 5), (3, 6)]


def test_send_without_port_runs_endpoint_and_drops_result(procs4: Any) -> None:
    counter = procs4.spawn("adv_send_noport", Counter, 0)
    send(counter.incr, (), {})
    assert list(counter.value.call().get(timeout=TIMEOUT).values()) == [1, 1, 1, 1]


def test_send_choose_selection_reaches_exactly_one_actor(procs4: Any) -> None:
    counter = procs4.spawn("adv_send_choose", Counter, 0)
    send(counter.incr, (), {}, selection="choose")
    # Same sender: the chosen actor handles its incr before this call reaches it.
    assert sorted(counter.value.call().get(timeout=TIMEOUT).values()) == [0, 0, 0, 1]


# --- Accumulator ----------------------------------------------------------------------------


def test_accumulator_sum_over_mesh_returns_total(procs2: Any) -> None:
    counter = procs2.spawn("adv_accumulate_sum", Counter, 3)
    counter.incr.broadcast()
    assert Accumulator(counter.value, 0, operator.add).accumulate().get(timeout=TIMEOUT) == 8


async def test_accumulator_awaited_returns_total(procs2: Any) -> None:
    counter = procs2.spawn("adv_accumulate_await", Counter, 2)
    assert await Accumulator(counter.value, 0, operator.add).accumulate() == 4


def test_accumulator_combine_is_left_fold_from_identity(procs4: Any) -> None:
    mesh = procs4.spawn("adv_accumulate_fold", Ranked)

    def combine(acc: tuple[Any, ...], reply: int) -> tuple[Any, ...]:
        # Called as combine(acc, reply); the other order would fail on `int + tuple`.
        return (*acc, reply)

    result = Accumulator(mesh.times_ten, ("start",), combine).accumulate().get(timeout=TIMEOUT)
    assert result[0] == "start"
    assert sorted(result[1:]) == [0, 10, 20, 30]


def test_accumulator_args_forwarded_to_stream(procs4: Any) -> None:
    mesh = procs4.spawn("adv_accumulate_args", Ranked)
    total = Accumulator(mesh.add, 0, operator.add).accumulate(5, b=1).get(timeout=TIMEOUT)
    assert total == 4 * 6 + (0 + 1 + 2 + 3)


def test_accumulator_empty_stream_returns_identity() -> None:
    # No mesh is empty (an empty slice is refused, as on torchmonarch), so the empty stream
    # comes from an endpoint-like object: Accumulator only needs `stream`.
    class NoReplies:
        def __init__(self) -> None:
            self.calls: list[Any] = []

        def stream(self, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((args, kwargs))
            return iter([])

    endpoint = NoReplies()
    identity = ["untouched"]
    result = Accumulator(endpoint, identity, operator.add).accumulate(1, b=2).get(timeout=TIMEOUT)
    assert result == ["untouched"]
    assert endpoint.calls == [((1,), {"b": 2})]


def test_accumulator_without_stream_raises_type_error() -> None:
    with pytest.raises(TypeError, match="Accumulator needs an endpoint"):
        Accumulator(3, 0, operator.add)  # type: ignore[arg-type]


# --- lambdas and rank/size (§4.6) -------------------------------------------------------------


def test_lambda_arguments_run_remotely_with_message_rank_and_size(procs2: Any) -> None:
    mesh = procs2.spawn("adv_rank_size", Ranked)
    ranks = mesh.run.call(lambda: current_rank()["gpus"]).get(timeout=TIMEOUT)
    sizes = mesh.run.call(lambda: current_size()["gpus"]).get(timeout=TIMEOUT)
    assert sum(ranks.values()) == 1
    assert sum(sizes.values()) == 4


def test_lambda_repr_of_current_rank_uses_coord_slash_size(procs2: Any) -> None:
    mesh = procs2.spawn("adv_rank_repr", Ranked)
    reprs = mesh.run.call(lambda: str(current_rank())).get(timeout=TIMEOUT)
    assert list(reprs.values()) == ["{'gpus': 0/2}", "{'gpus': 1/2}"]


def test_value_mesh_repr_starts_with_extent(procs2: Any) -> None:
    mesh = procs2.spawn("adv_vm_repr", Ranked)
    result = mesh.whoami.call().get(timeout=TIMEOUT)
    assert repr(result).startswith("ValueMesh({gpus: 2}):")
