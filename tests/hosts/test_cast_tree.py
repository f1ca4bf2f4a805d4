"""Casts as a tree across `monarch worker` hosts on loopback (127.0.0.2, 127.0.0.3).

With `cast_tree="always"` (these meshes are smaller than `auto`'s `relay.TREE_MIN_RANKS`), a
cast to a proc mesh on two hosts leaves the controller as one `relay` control per host, the
relay (the host's lowest live rank) hands it to its procs, and a `call()`'s replies come back as
one batch per host. Order per sender and actor is kept, and a proc or relay that dies during a
call fails it with `SupervisionError` instead of leaving it hanging.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.runtime.envelope import CALL, CONTROL
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, attach_to_workers, current_rank, endpoint
from monarch.config import configured
from tests.cast_spies import Casts
from tests.hosts.conftest import Workers

pytestmark = pytest.mark.timeout(120)

TRUST = "trust_all_connections"


class Seen(Actor):
    """Records the calls it got, in order."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    @endpoint
    def note(self, i: int) -> int:
        self.seen.append(i)
        return i

    @endpoint
    def where(self, pad: bytes = b"") -> tuple[int, int, int]:
        return current_rank().rank, os.getpid(), len(pad)

    @endpoint
    def log(self) -> list[int]:
        return self.seen

    @endpoint
    def die_on(self, rank: int) -> int:
        if current_rank().rank == rank:
            os._exit(9)
        return current_rank().rank


@pytest.fixture
def hosts(two_workers: Workers) -> Iterator[Any]:
    mesh = attach_to_workers(ca=TRUST, workers=two_workers.addresses, name="tree")
    try:
        with configured(cast_tree="always"):
            yield mesh
    finally:
        mesh.shutdown().get(timeout=30)


def test_one_envelope_per_host_and_one_batch_back(hosts: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    procs = hosts.spawn_procs(per_host={"gpus": 3})
    actors = procs.spawn("seen", Seen)
    casts = Casts(monkeypatch)
    # The first call goes before the procs are up: it waits for them, still one per host.
    got = actors.where.call().get(timeout=60)
    assert [v[0] for _, v in got.items()] == list(range(6))
    assert len({v[1] for _, v in got.items()}) == 6
    relays = [procs._table.keys[0], procs._table.keys[3]]
    assert sorted(casts.take()) == sorted((r, CONTROL, "relay_cast") for r in relays)
    assert casts.batches == 2

    pad = b"x" * 200_000  # out of band: the payload crosses to each host once
    got = actors.where.call(pad).get(timeout=30)
    assert [(v[0], v[2]) for _, v in got.items()] == [(r, len(pad)) for r in range(6)]
    assert sorted(casts.take()) == sorted((r, CONTROL, "relay_cast") for r in relays)
    assert casts.batches == 4

    # A slice that leaves out the relays still goes through them, and so does a call_one.
    assert [v[0] for _, v in actors.slice(gpus=2).where.call().get(timeout=30).items()] == [0, 1]
    assert sorted(casts.take()) == sorted((r, CONTROL, "relay_cast") for r in relays)
    assert actors.slice(hosts=1, gpus=1).where.call_one().get(timeout=30)[0] == 0
    assert casts.take() == [(relays[1], CONTROL, "relay_cast")]

    # Without the tree: one CALL per rank, one reply per rank.
    with configured(cast_tree="off"):
        assert len(actors.where.call().get(timeout=30)) == 6
    posts = casts.take()
    assert len(posts) == 6 and {kind for _, kind, _ in posts} == {CALL}
    assert casts.batches == 6  # unchanged: the replies came one by one
    procs.stop().get(timeout=30)


def test_order_per_actor_is_kept_across_call_call_one_and_broadcast(hosts: Any) -> None:
    procs = hosts.spawn_procs(per_host={"gpus": 2})
    actors = procs.spawn("order", Seen)
    expected: dict[int, list[int]] = {r: [] for r in range(4)}
    futures = []
    for i in range(60):
        kind = i % 3
        if kind == 0:
            futures.append(actors.note.call(i))
            targets = range(4)
        elif kind == 1:
            rank = (i // 3) % 4  # relays (0, 2) and the others (1, 3) in turn
            one = actors.slice(hosts=rank // 2, gpus=rank % 2)
            futures.append(one.note.call_one(i))
            targets = range(rank, rank + 1)
        else:
            actors.slice(gpus=1).note.broadcast(i)
            targets = range(1, 4, 2)
        for r in targets:
            expected[r].append(i)
    for f in futures:
        f.get(timeout=60)
    logs = actors.log.call().get(timeout=30)
    assert {p["hosts"] * 2 + p["gpus"]: v for p, v in logs.items()} == expected
    procs.stop().get(timeout=30)


def test_a_proc_or_a_relay_dying_during_a_call_fails_it(hosts: Any, fault_recorder: Any) -> None:
    # A proc that is not a relay (rank 1, on host 0).
    procs = hosts.spawn_procs(per_host={"gpus": 2}, name="victim")
    actors = procs.spawn("dies", Seen)
    assert len(actors.where.call().get(timeout=60)) == 4
    with pytest.raises(SupervisionError):
        actors.die_on.call(1).get(timeout=30)
    fault_recorder.wait_for(1, timeout=30)
    procs.stop().get(timeout=30)

    # A relay (rank 2, the first proc of host 1), while its host's other proc answers.
    procs = hosts.spawn_procs(per_host={"gpus": 2}, name="relay")
    actors = procs.spawn("dies", Seen)
    assert len(actors.where.call().get(timeout=60)) == 4
    with pytest.raises(SupervisionError):
        actors.die_on.call(2).get(timeout=30)
    fault_recorder.wait_for(2, timeout=30)
    # The host's next live proc relays from now on.
    survivor = procs.slice(hosts=1, gpus=1).spawn("after", Seen)
    assert survivor.note.call_one(5).get(timeout=30) == 5
    left = procs.slice(hosts=0).spawn("left", Seen)
    assert [v for _, v in left.note.call(6).get(timeout=30).items()] == [6, 6]
    procs.stop().get(timeout=30)


def test_auto_keeps_the_flat_cast_for_hosts_on_this_machine(
        hosts: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loopback hosts are this machine: past relay.TREE_MIN_RANKS procs, `auto` still casts flat.
    from monarch._src.mesh import relay

    procs = hosts.spawn_procs(per_host={"gpus": relay.TREE_MIN_RANKS // 2})
    assert procs._table.one_machine
    actors = procs.spawn("flat", Seen)
    casts = Casts(monkeypatch)
    with configured(cast_tree="auto"):
        assert len(actors.where.call().get(timeout=60)) == relay.TREE_MIN_RANKS
    posts = casts.take()
    assert len(posts) == relay.TREE_MIN_RANKS and {kind for _, kind, _ in posts} == {CALL}
    procs.stop().get(timeout=30)
