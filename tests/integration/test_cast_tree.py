"""Casts as a tree on this host: `cast_tree="always"` sends a cast through the host's relay
(its lowest rank) even on one host, `auto` (one host here) and `off` send one CALL per rank.

The multi-host cases (one relay per host, procs and relays dying) are in
tests/hosts/test_cast_tree.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Iterator
from typing import Any

import pytest

import monarch
from monarch._src.runtime.envelope import CALL, CONTROL
from monarch.actor import Actor, current_rank, endpoint, this_host
from monarch.config import configured
from tests.cast_spies import Casts

pytestmark = pytest.mark.timeout(90)


class Blocker(Actor):
    def __init__(self) -> None:
        self.seen: list[int] = []

    @endpoint
    async def note(self, i: int) -> int:
        self.seen.append(i)
        return current_rank().rank

    @endpoint
    async def log(self) -> list[int]:
        return self.seen

    @endpoint
    async def block(self) -> None:
        await asyncio.Event().wait()  # until cancelled


@pytest.fixture
def procs() -> Iterator[Any]:
    mesh = this_host().spawn_procs(per_host={"procs": 3})
    try:
        yield mesh
    finally:
        mesh.stop().get(timeout=30)


def test_cast_tree_refuses_other_values() -> None:
    with pytest.raises(ValueError, match="'cast_tree' expects 'auto'"):
        monarch.configure(cast_tree="sometimes")
    assert monarch.config.get_global_config()["cast_tree"] == "auto"


def test_always_sends_one_relay_control_and_gets_one_batch(
        procs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    actors = procs.spawn("tree", Blocker)
    casts = Casts(monkeypatch)
    with configured(cast_tree="always"):
        got = actors.note.call(1).get(timeout=30)
        assert [v for _, v in got.items()] == [0, 1, 2]
        assert casts.take_kinds() == [(CONTROL, "relay_cast")] and casts.batches == 1
        assert [f.get(timeout=30) for f in actors.note.stream(2)] != []
        actors.note.broadcast(3)
        assert actors.slice(procs=2).note.call_one(4).get(timeout=30) == 0
        assert casts.take_kinds() == [(CONTROL, "relay_cast")] * 3
        logs = actors.log.call().get(timeout=30)
        assert [v for _, v in logs.items()] == [[1, 2, 3], [1, 2, 3], [1, 2, 3, 4]]
    casts.take_kinds()
    for mode in ("auto", "off"):  # one host: one CALL per rank, one reply per rank
        with configured(cast_tree=mode):
            assert len(actors.note.call(5).get(timeout=30)) == 3
        assert casts.take_kinds() == [(CALL, "note")] * 3
    assert casts.batches == 2  # the relay's one, and the `log` call's


def test_cancel_follows_the_call_through_the_relay(procs: Any) -> None:
    actors = procs.spawn("cancel", Blocker)
    actors.note.call(0).get(timeout=30)
    with configured(cast_tree="always"):
        blocked = actors.block.call()
        assert blocked.cancel()
        with pytest.raises(concurrent.futures.CancelledError):
            blocked.get(timeout=10)
        # Each actor's blocked call was interrupted (else this would wait behind it).
        assert len(actors.note.call(1).get(timeout=30)) == 3
        one = actors.slice(procs=1).block.call_one()
        assert one.cancel()
        assert actors.slice(procs=1).note.call_one(2).get(timeout=30) == 0


class Recorder(Blocker):
    """Writes what it saw to `<directory>/<rank>` when it stops."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory

    async def __cleanup__(self, exc: BaseException | None) -> None:
        path = os.path.join(self.directory, str(current_rank().rank))
        seen = " ".join(map(str, self.seen))

        def write() -> None:
            with open(path, "w") as f:
                f.write(seen)

        await asyncio.to_thread(write)


def test_stop_follows_the_broadcasts_through_the_relay(procs: Any, tmp_path: Any) -> None:
    actors = procs.spawn("stopping", Recorder, str(tmp_path))
    actors.log.call().get(timeout=30)
    with configured(cast_tree="always"):
        for i in range(20):
            actors.note.broadcast(i)
        # The stop goes behind the broadcasts: each actor handled them all before stopping.
        actors.stop().get(timeout=30)
    expected = " ".join(map(str, range(20)))
    assert [(tmp_path / str(r)).read_text() for r in range(3)] == [expected] * 3
