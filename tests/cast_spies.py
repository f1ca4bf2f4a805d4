"""Spies on how this process casts: the casts its transport writes, and the `PORT_BATCH` replies
its `GatherPort`s get (tests of `cast_tree`, on one host and across hosts)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from monarch._src.runtime.envelope import CALL, CONTROL, PORT_BATCH
from monarch._src.runtime.ports import GatherPort
from monarch._src.runtime.runtime import get_runtime


class Casts:
    """The casts the transport writes, by either path (`send` through the loop, `send_direct`
    by the calling thread): (address, kind, relay op or method); not heartbeats, replies or
    spawns. `batches` counts the `PORT_BATCH` messages this process's `GatherPort`s get."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[str, int, str]] = []
        self.batches = 0
        transport = get_runtime().mailbox.transport
        send, send_direct = transport.send, transport.send_direct
        deliver = GatherPort.deliver

        def note(addr: str, env: Any) -> None:
            if env[0] == CALL or (env[0] == CONTROL and env.op in ("relay", "relay_cast")):
                with self.lock:
                    self.items.append((addr, env[0], env.op if env[0] == CONTROL else env.method))

        def spy(addr: str, env: Any, written: Any = None) -> None:
            note(addr, env)
            send(addr, env, written)

        def spy_direct(addr: str, env: Any) -> bool:
            sent: bool = send_direct(addr, env)
            if sent:
                note(addr, env)
            return sent

        def counting(port: GatherPort, payload: Any, rank: Any, status: int) -> None:
            if status == PORT_BATCH:
                self.batches += 1
            deliver(port, payload, rank, status)

        monkeypatch.setattr(transport, "send", spy)
        monkeypatch.setattr(transport, "send_direct", spy_direct)
        monkeypatch.setattr(GatherPort, "deliver", counting)

    def take(self) -> list[tuple[str, int, str]]:
        """The casts written since the last `take`, in order, with their addresses."""
        with self.lock:
            items, self.items = self.items, []
        return items

    def take_kinds(self) -> list[tuple[int, str]]:
        """As `take`, without the addresses."""
        return [(kind, name) for _, kind, name in self.take()]
