"""hosts/heartbeat.py: the one heartbeat monitor, driven by hand over a recording mailbox.

Rounds are run by calling the monitor's coroutine with its `asyncio.sleep` replaced by one that
advances a fake clock, so no test waits on time.
"""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from monarch._src.config import configured
from monarch._src.hosts import heartbeat
from monarch._src.hosts.heartbeat import HeartbeatMonitor

pytestmark = pytest.mark.timeout(30)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now


class _Mailbox:
    """Records pings; `answer(address)` delivers the pong of the latest ping to `address`."""

    def __init__(self) -> None:
        self.ports: dict[int, Any] = {}
        self.pings: list[tuple[str, tuple[str, ...]]] = []

    def open_port(self, entry: Any, waits_on: tuple[str, ...] = ()) -> tuple[str, int]:
        port_id = len(self.ports)
        self.ports[port_id] = (entry, waits_on)
        return ("me", port_id)

    def post(self, address: str, env: Any) -> None:
        assert env.op == "ping"
        self.pings.append((address, self.ports[env.reply[1]][1]))
        self.last = env.reply[1]

    def answer(self) -> None:
        self.ports[self.last][0].deliver(None, None, 0)


class _Runtime:
    def __init__(self) -> None:
        self.loop: Any = _Clock()
        self.mailbox = _Mailbox()


def _run(monitor: HeartbeatMonitor[Any], clock: _Clock, times: list[float],
         monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one round at each of `times` (the clock's reading), then stop."""
    ticks = iter(times)
    done = [False]

    async def sleep(_: float) -> None:
        try:
            clock.now = next(ticks)
        except StopIteration:
            done[0] = True

    # Only the monitor's module sees this asyncio (its rounds use nothing else of it).
    monkeypatch.setattr(heartbeat, "asyncio", types.SimpleNamespace(sleep=sleep))
    monitor.running = lambda: not done[0]
    asyncio.run(monitor._rounds())


def test_a_peer_that_answers_is_never_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = _Runtime()
    silent: list[Any] = []
    monitor: HeartbeatMonitor[str] = HeartbeatMonitor(
        rt, interval="heartbeat_interval", timeout="heartbeat_timeout",
        targets=lambda: [("tcp://a:1", "a")], on_silent=lambda *a: silent.append(a),
        running=lambda: True)
    real_post = rt.mailbox.post

    def post_and_answer(address: str, env: Any) -> None:
        real_post(address, env)
        rt.mailbox.answer()

    rt.mailbox.post = post_and_answer
    with configured(heartbeat_timeout="2s"):
        _run(monitor, rt.loop, [1.0, 2.0, 3.0, 4.0, 5.0], monkeypatch)
    assert silent == []
    assert [p[0] for p in rt.mailbox.pings] == ["tcp://a:1"] * 5
    assert monitor.unanswered == {}


def test_a_silent_peer_is_reported_once_its_oldest_ping_is_too_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rt = _Runtime()
    silent: list[tuple[Any, ...]] = []
    monitor: HeartbeatMonitor[str] = HeartbeatMonitor(
        rt, interval="heartbeat_interval", timeout="heartbeat_timeout",
        targets=lambda: [("tcp://a:1", "a")], on_silent=lambda *a: silent.append(a),
        running=lambda: True)
    with configured(heartbeat_timeout="2s"):
        _run(monitor, rt.loop, [1.0, 2.0, 3.0, 3.5], monkeypatch)
    # Pinged at 1, 2 and 3 (unanswered since 1); at 3.5 the oldest ping is 2.5 s old.
    assert len(rt.mailbox.pings) == 3
    assert silent == [("tcp://a:1", "a", 2.5, 2.0)]


def test_fail_with_peer_ties_each_ping_to_its_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = _Runtime()
    monitor: HeartbeatMonitor[str] = HeartbeatMonitor(
        rt, interval="heartbeat_interval", timeout="heartbeat_timeout",
        targets=lambda: [], on_silent=lambda *a: None, running=lambda: True,
        fail_with_peer=True)
    monitor.ping("tcp://client:1")
    assert rt.mailbox.pings == [("tcp://client:1", ("tcp://client:1",))]
    monitor.forget("tcp://client:1")
    assert monitor.unanswered == {}
