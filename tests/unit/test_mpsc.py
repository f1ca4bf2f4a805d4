"""The mpsc channel (`monarch._src.actor.mpsc`): many senders on any thread, one receiver that
waits without blocking its event loop, EOF when every sender is closed."""

from __future__ import annotations

import asyncio
import threading

import pytest

from monarch._src.actor.mpsc import Receiver, Sender, channel

pytestmark = pytest.mark.timeout(30)


def test_try_recv_in_send_order_then_none() -> None:
    tx, rx = channel()
    assert rx.try_recv() is None
    for n in (1, 2, 3):
        tx.send(n)
    assert [rx.try_recv(), rx.try_recv(), rx.try_recv(), rx.try_recv()] == [1, 2, 3, None]


def test_recv_waits_for_a_sender_on_another_thread() -> None:
    tx, rx = channel()
    waiting = threading.Event()

    async def main() -> list[int]:
        got = []
        asyncio.get_running_loop().call_soon(waiting.set)
        for _ in range(100):
            got.append(await rx.recv())
        return got

    def produce() -> None:
        waiting.wait(10)
        for n in range(100):
            tx.send(n)

    producer = threading.Thread(target=produce)
    producer.start()
    assert asyncio.run(main()) == list(range(100))
    producer.join()


def test_closed_senders_end_the_channel_after_what_was_sent() -> None:
    tx, rx = channel()
    second = Sender(tx._queue)
    tx.send("last")
    tx.close()
    assert rx.try_recv() == "last"
    assert rx.try_recv() is None  # `second` is still open
    second.close()
    with pytest.raises(EOFError, match="every sender is gone"):
        rx.try_recv()
    with pytest.raises(EOFError):
        asyncio.run(rx.recv())
    with pytest.raises(RuntimeError, match="closed sender"):
        tx.send(1)


def test_unconvertible_item_raises_when_received_and_the_channel_goes_on() -> None:
    tx, rx = channel()
    tx.send_unconvertible()
    tx.send(7)
    with pytest.raises(TypeError, match="could not be converted"):
        rx.try_recv()
    assert rx.try_recv() == 7


def test_subscript_is_the_class_itself() -> None:
    assert Receiver[int] is Receiver and Sender[str] is Sender
