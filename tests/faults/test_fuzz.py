"""Garbage on the wire: random or truncated bytes never crash a receiver.

A `SocketChannel` fed random bytes closes that one connection with an error (logged), raises
nothing into the event loop, and allocates nothing for a header that claims an absurd size. A
real proc whose port receives random bytes keeps serving its actors.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from typing import Any

import pytest

from monarch._src.transport.comm import encode_batch
from monarch._src.transport.socket_channel import HEAD, SocketChannel, frame_buffers
from monarch.actor import Actor, endpoint, this_host

pytestmark = pytest.mark.timeout(60)


async def _feed(data: bytes) -> tuple[list[Any], BaseException | None, list[dict[str, Any]]]:
    """Send `data` into a SocketChannel, then close; return batches, close error, loop errors."""
    loop = asyncio.get_running_loop()
    loop_errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    batches: list[Any] = []
    closed = loop.create_future()
    channel = SocketChannel(
        ours, batches.append, lambda exc: closed.done() or closed.set_result(exc)
    )
    theirs.sendall(data)
    theirs.close()
    exc = await asyncio.wait_for(closed, 10)
    assert channel.error is not None
    return batches, exc, loop_errors


def _valid_batch(value: Any) -> bytes:
    return b"".join(bytes(b) for b in frame_buffers(encode_batch([value])))


@pytest.mark.parametrize("seed", range(40))
async def test_socket_channel_random_bytes_closes_without_crashing(
    seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(seed)
    garbage = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 4096)))
    with caplog.at_level(logging.WARNING):
        batches, exc, loop_errors = await _feed(garbage)
    assert loop_errors == []
    assert isinstance(exc, (OSError, ValueError))
    # Whatever was delivered is a list of frames: garbage is never mistaken for more than that.
    assert all(isinstance(frames, list) for frames in batches)


async def test_socket_channel_huge_length_header_is_refused_before_allocating() -> None:
    header = HEAD.pack(1 << 62, 1)
    batches, exc, loop_errors = await _feed(header + b"x" * 100)
    assert batches == []
    assert "codec_max_frame_length" in str(exc)
    assert loop_errors == []


async def test_socket_channel_truncated_batch_delivers_nothing() -> None:
    whole = _valid_batch(("hello", 1))
    for cut in (1, HEAD.size, HEAD.size + 3, len(whole) - 1):
        batches, exc, loop_errors = await _feed(whole[:cut])
        assert batches == []
        assert loop_errors == []
        assert isinstance(exc, OSError)


async def test_socket_channel_valid_batches_then_garbage_delivers_the_valid_ones() -> None:
    data = _valid_batch(("a", 1)) + _valid_batch(("b", 2)) + b"\xff" * 64
    batches, exc, loop_errors = await _feed(data)
    assert len(batches) == 2
    assert loop_errors == []
    assert exc is not None


async def test_socket_channel_frame_lengths_that_overrun_the_body_are_refused() -> None:
    # A header announcing one frame of 1,000 bytes in a 16-byte body.
    body = (1000).to_bytes(8, "little") + b"\0" * 8
    batches, exc, loop_errors = await _feed(HEAD.pack(len(body), 1) + body)
    assert batches == []
    assert "exceed" in str(exc) or "add up" in str(exc)
    assert loop_errors == []


class _Echo(Actor):
    @endpoint
    def echo(self, value: int) -> int:
        return value


def test_proc_port_random_bytes_proc_keeps_serving() -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        actor = procs.spawn("fuzzed", _Echo)
        assert actor.echo.call_one(1).get(timeout=30) == 1
        addr = procs._table.keys[0]
        host, port = addr.removeprefix("tcp://").rsplit(":", 1)
        rng = random.Random(7)
        for _ in range(20):
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 2048))))
        assert actor.echo.call_one(2).get(timeout=30) == 2
    finally:
        procs.stop().get(timeout=60)

