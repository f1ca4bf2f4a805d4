"""Posts written by the posting thread itself (`Mailbox.post` -> `Transport.send_direct`) keep
the order per thread with posts that go through the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.runtime.envelope import CALL, Call, decode, encode
from monarch._src.runtime.mailbox import Mailbox
from monarch._src.runtime.ports import OncePort
from monarch._src.transport.comm import Transport

pytestmark = pytest.mark.timeout(60)


class _Recorder:
    """An actor that records (thread tag, index) of every call and answers its reply port."""

    def __init__(self, mailbox: Mailbox, expected: int) -> None:
        self.mailbox = mailbox
        self.seen: list[tuple[str, int]] = []
        self.expected = expected
        self.all_in = threading.Event()

    def enqueue(self, env: Call) -> None:
        tag, index, _blob = decode(env.payload)
        self.seen.append((tag, index))
        if env.reply is not None:
            self.mailbox.reply(env.reply, index)
        if len(self.seen) == self.expected:
            self.all_in.set()


@pytest.fixture
def two_mailboxes() -> Iterator[tuple[Mailbox, Mailbox]]:
    """Two mailboxes on tcp, each on its own loop thread (as in a controller and a proc)."""
    made: list[tuple[Mailbox, asyncio.AbstractEventLoop, threading.Thread]] = []
    for _ in range(2):
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        mailbox = Mailbox(loop)
        mailbox.loop_thread = thread
        asyncio.run_coroutine_threadsafe(mailbox.start("tcp://127.0.0.1:0"), loop).result(10)
        made.append((mailbox, loop, thread))
    yield made[0][0], made[1][0]
    for mailbox, loop, thread in made:
        asyncio.run_coroutine_threadsafe(mailbox.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_order_per_thread_is_kept_across_direct_and_queued_posts(
    two_mailboxes: tuple[Mailbox, Mailbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_mailboxes
    per_thread, threads = 1500, 3
    recorder = _Recorder(b, per_thread * threads)
    b.actors["rec"] = recorder
    direct = {"yes": 0, "no": 0}
    send_direct = Transport.send_direct

    def counting(self: Transport, addr: str, env: Any) -> bool:
        done = send_direct(self, addr, env)
        direct["yes" if done else "no"] += 1
        return done

    monkeypatch.setattr(Transport, "send_direct", counting)
    big = bytearray(256 * 1024)  # out of band: such posts always go through the loop

    def sender(tag: str) -> None:
        for i in range(per_thread):
            entry = reply = None
            if i % 10 == 0:  # some calls wait for their answer, so the direct path is taken
                entry = OncePort()
                reply = a.open_port(entry, (b.address,))
            blob = big if i % 10 == 1 else b""  # queued; the next post may go direct
            a.post(b.address, Call(CALL, "rec", "m", encode((tag, i, blob)), reply, None, None))
            if entry is not None:
                entry.cf.result(10)

    workers = [threading.Thread(target=sender, args=(f"t{n}",)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert recorder.all_in.wait(30)
    for n in range(threads):
        mine = [index for tag, index in recorder.seen if tag == f"t{n}"]
        assert mine == list(range(per_thread))
    assert direct["yes"] > 0 and direct["no"] > 0  # both paths were taken


def test_a_lone_call_and_its_reply_take_the_direct_path(
    two_mailboxes: tuple[Mailbox, Mailbox],
) -> None:
    a, b = two_mailboxes
    recorder = _Recorder(b, 3)
    b.actors["rec"] = recorder
    for i in range(3):
        entry = OncePort()
        reply = a.open_port(entry, (b.address,))
        a.post(b.address, Call(CALL, "rec", "m", encode(("x", i, b"")), reply, None, None))
        entry.cf.result(10)
    # The connection was up and idle for the last calls: no flush of the loop carried them.
    peer = a.transport._peers[b.address]
    assert peer.heard and not peer.queue


# ---- one small frame, joined on the way out and cut straight out of staging on the way in -------


@pytest.mark.parametrize("size", [0, 1, 55, 56, 64, 1000, 4096])
def test_one_frame_is_the_gathered_batch_joined(size: int) -> None:
    from monarch._src.transport.socket_channel import (
        frame_buffers,
        gathered_buffers,
        one_frame,
        split_body,
    )

    frame = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert one_frame(frame) == b"".join(bytes(b) for b in gathered_buffers([frame]))
    assert [bytes(b) for b in frame_buffers([frame])] == [one_frame(frame)]
    body = one_frame(frame)[12:]
    assert [bytes(f) for f in split_body(body, 1)] == [frame]


def test_a_one_frame_batch_with_a_wrong_length_closes_the_connection() -> None:
    """The receiving shortcut for one small frame checks its length as `split_body` does."""
    import socket

    from monarch._src.transport.socket_channel import ProtocolError, SocketChannel, one_frame

    async def run() -> tuple[list[bytes], BaseException | None]:
        ours, theirs = socket.socketpair()
        got: list[bytes] = []
        closed: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        ours.setblocking(False)
        channel = SocketChannel(ours, lambda frames: got.extend(bytes(f) for f in frames),
                                lambda exc: closed.done() or closed.set_result(exc))
        good = one_frame(b"fine")
        bad = bytearray(one_frame(b"oops"))
        bad[12:20] = (3).to_bytes(8, "little")  # claims 3 bytes in a 4-byte slot
        theirs.sendall(good + bytes(bad))
        error = await asyncio.wait_for(closed, 10)
        channel.abort()
        theirs.close()
        return got, error

    got, error = asyncio.run(run())
    assert got == [b"fine"]
    assert isinstance(error, ProtocolError)
