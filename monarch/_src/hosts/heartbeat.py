"""One heartbeat monitor for the hosts layer's "is it still there?" watches.

Exits and broken connections are seen at once by other means (the child watch, the transport);
heartbeats catch a peer that is there but does not answer (stopped, deadlocked, swapped out, a
host cut off without a reset). A `HeartbeatMonitor` pings a changing set of peers, each round
(`interval`, a config key read every round), with a `ping` control, and keeps for each peer the
loop time of its oldest unanswered ping; a peer whose oldest unanswered ping is older than
`timeout` (a config key) is reported with `on_silent` instead of being pinged again.

Used by the local host agent for its procs (`heartbeat_interval` / `heartbeat_timeout`), by
the remote host agent for its hosts and by a host server for its client
(`host_heartbeat_interval` / `host_heartbeat_timeout`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from monarch._src.config import duration_seconds
from monarch._src.mesh.control_ops import Ping
from monarch._src.runtime.control import control
from monarch._src.runtime.ports import PortEntry
from monarch._src.runtime.runtime import Runtime

__all__ = ["HeartbeatMonitor"]

T = TypeVar("T")


class HeartbeatMonitor(Generic[T]):
    """Pings `targets()` every `interval` while `running()`; reports the silent ones.

    `targets()` returns `(address, target)` pairs, the peers to watch this round (any value the
    caller wants back as `target`); `on_silent(address, target, silence, timeout)` runs on the
    loop for a peer silent longer than `timeout` (seconds; it is not pinged that round: the
    caller takes it out of `targets()`, or it is reported again next round). With
    `fail_with_peer`, a ping's port is dropped when the connection to its peer breaks.
    """

    def __init__(
        self, rt: Runtime, *, interval: str, timeout: str,
        targets: Callable[[], Iterable[tuple[str, T]]],
        on_silent: Callable[[str, T, float, float], None],
        running: Callable[[], bool],
        fail_with_peer: bool = False,
    ) -> None:
        self.rt = rt
        self.interval = interval
        self.timeout = timeout
        self.targets = targets
        self.on_silent = on_silent
        self.running = running
        self.fail_with_peer = fail_with_peer
        self.unanswered: dict[str, float] = {}  # address -> loop time of its oldest ping
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the rounds unless they run (runtime loop)."""
        if (self._task is None or self._task.done()) and self.running():
            self._task = self.rt.loop.create_task(self._rounds())

    def cancel(self) -> None:
        """Stop the rounds (any thread)."""
        task = self._task
        if task is not None:
            self.rt.loop.call_soon_threadsafe(task.cancel)

    def forget(self, address: str) -> None:
        """`address` is gone: drop its unanswered ping (runtime loop)."""
        self.unanswered.pop(address, None)

    async def _rounds(self) -> None:
        loop = self.rt.loop
        while self.running():
            await asyncio.sleep(duration_seconds(self.interval))
            if not self.running():
                break
            timeout = duration_seconds(self.timeout)
            now = loop.time()
            for address, target in list(self.targets()):
                asked = self.unanswered.get(address)
                if asked is not None and now - asked > timeout:
                    self.on_silent(address, target, now - asked, timeout)
                    continue
                self.ping(address)

    def ping(self, address: str) -> None:
        """Ping `address` now (it counts as unanswered from now, unless it already was; loop)."""
        self.unanswered.setdefault(address, self.rt.loop.time())
        waits_on = (address,) if self.fail_with_peer else ()
        port = self.rt.mailbox.open_port(_Pong(self.unanswered, address), waits_on)
        self.rt.mailbox.post(address, control(Ping(), port))


class _Pong(PortEntry):
    """The answer to one ping: the peer is alive, none of its pings is unanswered any more."""

    def __init__(self, unanswered: dict[str, float], address: str) -> None:
        self.unanswered = unanswered
        self.address = address

    def deliver(self, payload: Any, rank: int | None, status: int) -> None:
        self.closed = True
        self.unanswered.pop(self.address, None)

    def fail(self, exc: BaseException) -> None:
        self.closed = True
