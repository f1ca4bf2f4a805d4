"""What a process knows of a dead peer is kept per incarnation, not per address: a new process
that listens where a dead one did (the OS reuses ports) is reachable once it is heard, while the
dead process itself stays dead if it speaks again (a host that was lost, then comes back)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from monarch._src.runtime.envelope import CALL, Call, decode, encode
from monarch._src.runtime.mailbox import Mailbox
from monarch._src.runtime.ports import OncePort, decode_reply
from monarch._src.supervision.errors import SupervisionError

pytestmark = pytest.mark.timeout(60)
T = 10.0


class _Echo:
    """An actor that answers each call with its argument."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox

    def enqueue(self, env: Call) -> None:
        if env.reply is not None:
            self.mailbox.reply(env.reply, decode(env.payload))


class _Box:
    """A mailbox on a loop thread of its own, as in a controller or a proc."""

    def __init__(self, address: str = "tcp://127.0.0.1:0") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.mailbox = Mailbox(self.loop)
        self.mailbox.loop_thread = self.thread
        self.run(self.mailbox.start(address))
        self.mailbox.actors["echo"] = _Echo(self.mailbox)

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(T)

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        async def call() -> Any:
            return fn()
        return self.run(call())

    def ask(self, addr: str, value: Any) -> Any:
        """Call `echo` at `addr`; its answer (raises what the port got)."""
        entry = OncePort()
        reply = self.mailbox.open_port(entry, (addr,))
        self.mailbox.post(addr, Call(CALL, "echo", "m", encode(value), reply, None, None))
        return decode_reply(entry.cf.result(T))

    def close(self) -> None:
        self.run(self.mailbox.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(T)
        self.loop.close()


@pytest.fixture
def boxes() -> Iterator[list[_Box]]:
    made: list[_Box] = []
    yield made
    for box in made:
        box.close()


def test_a_new_process_at_a_dead_address_is_reachable_once_heard(boxes: list[_Box]) -> None:
    a, old = _Box(), _Box()
    boxes.append(a)
    addr = old.mailbox.address
    assert old.ask(a.mailbox.address, 1) == 1  # a heard the old incarnation
    a.on_loop(lambda: a.mailbox.mark_dead(addr, SupervisionError("that proc exited")))
    old.close()
    new = _Box(addr)  # the same port, another process
    boxes.append(new)
    assert new.mailbox.transport.incarnation != old.mailbox.transport.incarnation
    with pytest.raises(SupervisionError, match="that proc exited"):
        a.ask(addr, 2)  # not heard yet: still the dead one, as far as `a` knows
    assert new.ask(a.mailbox.address, 3) == 3  # its hello says it is another process
    assert not a.on_loop(lambda: a.mailbox.is_dead(addr))
    assert a.ask(addr, 4) == 4


def test_the_dead_process_itself_stays_dead_when_it_speaks_again(boxes: list[_Box]) -> None:
    a, lost = _Box(), _Box()
    boxes.extend([a, lost])
    addr = lost.mailbox.address
    assert lost.ask(a.mailbox.address, 1) == 1
    a.on_loop(lambda: a.mailbox.mark_dead(addr, SupervisionError("the host was lost")))
    # It reconnects (a partition healed): the same incarnation says hello on a new connection.
    arrived = threading.Event()
    a.mailbox.actors["seen"] = type("Seen", (), {"enqueue": lambda self, env: arrived.set()})()
    # (Dropping it closed their connections: `lost` took `a` for dead in turn; it forgets.)
    lost.on_loop(lambda: lost.mailbox.revive(a.mailbox.address))
    lost.mailbox.post(a.mailbox.address, Call(CALL, "seen", "m", encode(None), None, None, None))
    assert arrived.wait(T)
    assert a.on_loop(lambda: a.mailbox.is_dead(addr))
    with pytest.raises(SupervisionError, match="the host was lost"):
        a.ask(addr, 2)
