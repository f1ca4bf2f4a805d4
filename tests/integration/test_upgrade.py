"""`ActorMesh.upgrade(NewClass)`: hot reload of running actors, keeping their state (real procs)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from monarch.actor import Actor, ActorError, current_rank, endpoint, this_host

pytestmark = pytest.mark.timeout(120)


class Counter(Actor):
    def __init__(self) -> None:
        self.n = 0
        self.pid = os.getpid()

    @endpoint
    def inc(self) -> int:
        self.n += 1
        return self.n

    @endpoint
    def where(self) -> int:
        return self.pid


class CounterBy10(Actor):
    @endpoint
    def inc(self) -> int:
        self.n += 10
        return self.n

    @endpoint
    def where(self) -> int:
        return self.pid

    @endpoint
    def double(self) -> int:
        return 2 * self.n


class CounterRenamed(Actor):
    def __upgrade__(self, old_state: dict[str, Any]) -> None:
        self.total = old_state.pop("n")
        del self.n

    @endpoint
    def inc(self) -> int:
        self.total += 100
        return self.total


class BrokenUpgrade(Actor):
    def __upgrade__(self, old_state: dict[str, Any]) -> None:
        self.n = -1
        raise RuntimeError("cannot migrate")

    @endpoint
    def inc(self) -> int:
        return -1


class Journal(Actor):
    def __init__(self) -> None:
        self.entries: list[str] = ["start"]
        self.meta = {"version": 1}

    @endpoint
    def state(self) -> tuple[list[str], dict[str, int]]:
        return self.entries, self.meta

    @endpoint
    def kind(self) -> str:
        return "journal"


class JournalFailingOnRankOne(Actor):
    """An upgrade that changes nested state in place on every rank and fails on rank 1 only."""

    def __upgrade__(self, old_state: dict[str, Any]) -> None:
        self.entries.append("migrated")  # the old state's own list, changed in place
        self.meta["version"] = 2
        if current_rank().rank == 1:
            raise RuntimeError("rank 1 cannot migrate")

    @endpoint
    def state(self) -> tuple[list[str], dict[str, int]]:
        return [], {}

    @endpoint
    def kind(self) -> str:
        return "upgraded"


class WithUpgradeEndpoint(Actor):
    @endpoint
    def upgrade(self, x: int) -> int:
        return x + 1


@pytest.fixture(scope="module")
def procs() -> Any:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    yield procs
    procs.stop().get(timeout=60)


def test_upgrade_keeps_state_and_runs_the_new_code(procs: Any) -> None:
    m = procs.spawn("counter", Counter)
    pids = m.where.call().get(timeout=30).values()
    for _ in range(5):
        m.inc.call().get(timeout=30)
    in_flight = m.inc.call()  # sent before the upgrade: runs on the old code
    upgraded = m.upgrade(CounterBy10)
    assert in_flight.get(timeout=30).values() == [6, 6]
    assert upgraded.get(timeout=30) is None
    assert m.inc.call().get(timeout=30).values() == [16, 16]
    assert m.double.call().get(timeout=30).values() == [32, 32]  # a new endpoint
    assert m.where.call().get(timeout=30).values() == pids  # same procs, not restarted


def test_upgrade_hook_receives_the_old_state(procs: Any) -> None:
    m = procs.spawn("renamed", Counter)
    for _ in range(5):
        m.inc.call().get(timeout=30)
    m.upgrade(CounterRenamed).get(timeout=30)
    assert m.inc.call().get(timeout=30).values() == [105, 105]


def test_failed_upgrade_hook_keeps_the_old_code_and_state(procs: Any) -> None:
    m = procs.spawn("broken", Counter)
    m.inc.call().get(timeout=30)
    with pytest.raises(ActorError, match="cannot migrate"):
        m.upgrade(BrokenUpgrade).get(timeout=30)
    # The actors kept their class: the old `inc` on the old state.
    assert m.inc.call().get(timeout=30).values() == [2, 2]
    assert m._class is Counter


def test_upgrade_refuses_what_is_not_an_actor_class(procs: Any) -> None:
    m = procs.spawn("refuse", Counter)
    with pytest.raises(TypeError, match=r"upgrade\(42\) of actor mesh refuse: expected the new"):
        m.upgrade(42)
    with pytest.raises(ValueError, match="must subclass monarch.service.Actor"):
        m.upgrade(dict)


def test_an_endpoint_named_upgrade_is_still_an_endpoint(procs: Any) -> None:
    m = procs.spawn("ep", WithUpgradeEndpoint)
    assert m.upgrade.call(1).get(timeout=30).values() == [2, 2]


def test_upgrade_of_a_stopped_mesh_raises(procs: Any) -> None:
    m = procs.spawn("gone", Counter)
    m.stop().get(timeout=30)
    with pytest.raises(Exception, match="stopped"):
        m.upgrade(CounterBy10)


def test_an_upgrade_failing_on_some_ranks_rolls_every_rank_back(procs: Any) -> None:
    m = procs.spawn("journal", Journal)
    with pytest.raises(ActorError) as info:
        m.upgrade(JournalFailingOnRankOne).get(timeout=30)
    text = str(info.value)
    assert "failed on ranks [1]" in text and "rank 1 cannot migrate" in text
    assert "Every rank was rolled back to Journal" in text
    # Rank 0's __upgrade__ succeeded, yet it runs the old class too, on the state it had before
    # the upgrade (nested objects changed in place included: the rollback is from a deep copy).
    assert m.kind.call().get(timeout=30).values() == ["journal", "journal"]
    assert m.state.call().get(timeout=30).values() == [(["start"], {"version": 1})] * 2
    assert m._class is Journal
    # and the mesh can be upgraded again once __upgrade__ is fixed
    m.upgrade(CounterBy10).get(timeout=30)
    assert m._class is CounterBy10
