"""The pool of receive buffers (transport/bufpool.py) and the socket channel reading into it.

Each pool test uses a pool of its own with a fixed bound, so the counts it checks are its own;
the last tests drive a real `SocketChannel` over a connected socket pair.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import weakref

import pytest

from monarch._src.config import configured
from monarch._src.transport import bufpool
from monarch._src.transport.bufpool import BufferPool, size_class
from monarch._src.transport.socket_channel import SocketChannel

pytestmark = pytest.mark.timeout(60)

MIB = 1 << 20


def test_size_class_rounds_up_to_pages_and_at_most_a_sixteenth() -> None:
    for size in (1, 4095, 4096, 300_000, 64 * MIB, 64 * MIB + 1000, 100 * MIB + 5):
        cls = size_class(size)
        assert cls >= size and cls % 4096 == 0
        assert cls == 4096 or cls <= size * 17 // 16
    assert size_class(64 * MIB) == 64 * MIB
    assert size_class(64 * MIB + 1000) == size_class(64 * MIB + 2000) == 68 * MIB


def test_acquire_gives_a_writable_flat_page_aligned_view_of_the_size_asked() -> None:
    import numpy as np

    view = BufferPool(16 * MIB).acquire(3 * MIB + 5)
    assert view.nbytes == 3 * MIB + 5 and view.format == "B" and view.ndim == 1
    assert not view.readonly
    assert np.frombuffer(view, dtype=np.uint8).ctypes.data % 4096 == 0
    view[-1] = 7
    assert view[-1] == 7


def test_a_freed_buffer_is_reused_and_counted() -> None:
    pool = BufferPool(16 * MIB)
    view = pool.acquire(2 * MIB)
    view[:4] = b"abcd"
    address = _address(view)
    del view
    again = pool.acquire(2 * MIB - 100)  # same size class
    assert (pool.allocations, pool.reuses) == (1, 1)
    assert _address(again) == address
    del again
    for _ in range(10):
        pool.acquire(2 * MIB)  # each view is freed at once, before the next acquire
    assert (pool.allocations, pool.reuses) == (1, 11)
    assert pool.free_bytes == 2 * MIB


def test_a_buffer_under_a_live_numpy_array_is_never_handed_out_again() -> None:
    import numpy as np

    pool = BufferPool(16 * MIB)
    first = pool.acquire(MIB)
    first[:] = bytes([1]) * MIB
    kept = np.frombuffer(first[4096:], dtype=np.uint8)  # only a slice of it survives
    del first
    second = pool.acquire(MIB)
    assert pool.allocations == 2 and pool.reuses == 0
    second[:] = bytes([2]) * MIB
    kept[:] = 9  # writing into the old array must not touch the new buffer
    assert bytes(second) == bytes([2]) * MIB
    del second
    assert pool.free_bytes == MIB  # the second buffer came back; the first is still in use
    del kept
    assert pool.free_bytes == 2 * MIB
    pool.acquire(MIB)
    assert pool.reuses == 1


def test_a_buffer_under_a_live_torch_tensor_is_never_handed_out_again() -> None:
    torch = pytest.importorskip("torch")

    pool = BufferPool(16 * MIB)
    view = pool.acquire(MIB)
    view[:] = bytes([1]) * MIB
    tensor = torch.frombuffer(view[64:], dtype=torch.uint8)
    del view
    other = pool.acquire(MIB)
    assert pool.allocations == 2
    other[:] = bytes([2]) * MIB
    tensor.fill_(9)
    assert bytes(other) == bytes([2]) * MIB
    del other
    free_before = pool.free_bytes
    del tensor
    assert pool.free_bytes == free_before + MIB


def test_a_lease_freed_in_another_thread_comes_back() -> None:
    pool = BufferPool(16 * MIB)
    box = [pool.acquire(MIB)]
    thread = threading.Thread(target=box.clear)
    thread.start()
    thread.join()
    assert pool.free_bytes == MIB


def test_a_lease_in_a_reference_cycle_comes_back_when_collected() -> None:
    pool = BufferPool(16 * MIB)
    cycle: list[object] = [pool.acquire(MIB)]
    cycle.append(cycle)
    del cycle
    assert pool.free_bytes == 0
    gc.collect()
    assert pool.free_bytes == MIB


def test_the_pool_keeps_at_most_its_bound_dropping_the_least_recently_freed() -> None:
    pool = BufferPool(3 * MIB)
    leases = [pool.acquire(MIB) for _ in range(5)]
    addresses = [_address(view) for view in leases]
    mappings = []
    while leases:  # freed in order 0..4: 0 and 1 are unmapped, 2..4 kept
        del leases[0]
        [newest] = [b for b in pool._order.values() if b.address == addresses[len(mappings)]]
        mappings.append(weakref.ref(newest.mapping))
        del newest
    assert pool.free_bytes == 3 * MIB
    # The dropped mappings are gone (an mmap object unmaps its memory when freed).
    assert [m() is None for m in mappings] == [True, True, False, False, False]
    again = [pool.acquire(MIB) for _ in range(3)]
    assert sorted(_address(view) for view in again) == sorted(addresses[2:])
    assert pool.reuses == 3 and pool.allocations == 5


def test_a_buffer_larger_than_the_bound_is_never_kept() -> None:
    pool = BufferPool(2 * MIB)
    pool.acquire(4 * MIB)
    assert pool.free_bytes == 0
    pool.acquire(4 * MIB)
    assert (pool.allocations, pool.reuses) == (2, 0)


def test_a_bound_of_zero_turns_pooling_off() -> None:
    pool = BufferPool(0)
    for _ in range(3):
        pool.acquire(MIB)
    assert (pool.allocations, pool.reuses, pool.free_bytes) == (3, 0, 0)


def test_the_process_pool_follows_recv_buffer_pool_bytes() -> None:
    pool = BufferPool()  # no fixed bound: reads the config key, like bufpool.POOL
    with configured(recv_buffer_pool_bytes=0):
        pool.acquire(MIB)
        assert pool.free_bytes == 0
    pool.acquire(MIB)
    assert pool.free_bytes == MIB  # the default bound (256 MiB) keeps it
    assert bufpool.POOL.limit == 256 * MIB


def test_recv_buffer_pool_bytes_refuses_a_negative_bound() -> None:
    with pytest.raises(ValueError, match="'recv_buffer_pool_bytes' expects a number of bytes >= 0"):
        with configured(recv_buffer_pool_bytes=-1):
            pass


def test_acquire_refuses_a_size_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="BufferPool.acquire needs a positive size, got 0"):
        BufferPool(MIB).acquire(0)


def test_clear_unmaps_the_free_buffers() -> None:
    pool = BufferPool(8 * MIB)
    pool.acquire(MIB)
    pool.clear()
    assert pool.free_bytes == 0
    pool.acquire(MIB)
    assert pool.allocations == 2


# -- the socket channel reads large batches into pooled buffers -----------------------------


async def _exchange(payloads: list[bytes]) -> list[list[memoryview]]:
    """Send each payload as a one-frame batch over a real socket pair; return the batches."""
    left, right = socket.socketpair()
    for sock in (left, right):
        sock.setblocking(False)
    received: list[list[memoryview]] = []
    done = asyncio.get_running_loop().create_future()

    def on_frames(frames: list[memoryview]) -> None:
        received.append(frames)
        if len(received) == len(payloads) and not done.done():
            done.set_result(None)

    reader = SocketChannel(right, on_frames, lambda exc: None)
    writer = SocketChannel(left, None, lambda exc: None)
    try:
        for payload in payloads:
            await writer.write([payload])
        await asyncio.wait_for(done, 30)
    finally:
        writer.abort()
        reader.abort()
    return received


async def test_socket_channel_receives_a_large_batch_into_a_reused_pooled_buffer() -> None:
    pool = bufpool.POOL
    pool.clear()
    allocations, reuses = pool.allocations, pool.reuses
    payloads = [bytes([i]) * (5 * MIB) for i in range(4)]
    batches = await _exchange(payloads[:1])
    [[frame]] = batches
    assert bytes(frame) == payloads[0] and not frame.readonly
    address = _address(frame)
    del frame, batches
    batches = await _exchange(payloads[1:2])
    assert _address(batches[0][0]) == address  # the freed buffer served the next batch
    kept = batches[0][0]
    del batches
    batches = await _exchange(payloads[2:])
    assert _address(batches[0][0]) != address  # the kept frame's buffer is still in use
    assert [bytes(b[0]) for b in batches] == payloads[2:]
    kept[:] = bytes(len(kept))  # writing into the kept frame leaves the later ones intact
    assert [bytes(b[0]) for b in batches] == payloads[2:]
    assert (pool.allocations - allocations, pool.reuses - reuses) == (3, 1)


async def test_socket_channel_small_batches_do_not_use_the_pool() -> None:
    pool = bufpool.POOL
    allocations, reuses = pool.allocations, pool.reuses
    batches = await _exchange([b"x" * 1000, b"y" * 100_000])
    assert [bytes(b[0]) for b in batches] == [b"x" * 1000, b"y" * 100_000]
    assert (pool.allocations, pool.reuses) == (allocations, reuses)


def _address(view: memoryview) -> int:
    """The address of a buffer's first byte."""
    import ctypes

    return ctypes.addressof(ctypes.c_ubyte.from_buffer(view))


def test_receive_buffer_is_a_bytearray_below_the_pooled_size_and_pooled_from_it() -> None:
    small = bufpool.receive_buffer(bufpool.POOLED_FROM - 1)
    assert type(small) is bytearray and len(small) == bufpool.POOLED_FROM - 1
    allocations, reuses = bufpool.POOL.allocations, bufpool.POOL.reuses
    large = bufpool.receive_buffer(bufpool.POOLED_FROM)
    assert type(large) is memoryview and large.nbytes == bufpool.POOLED_FROM
    assert bufpool.POOL.allocations + bufpool.POOL.reuses == allocations + reuses + 1


async def test_socket_channel_reads_a_batch_larger_than_one_read_burst_intact() -> None:
    from monarch._src.transport import socket_channel

    payload = bytes(range(256)) * ((socket_channel._READ_BURST * 5 // 2) // 256)
    [[frame]] = await _exchange([payload])
    assert frame.nbytes == len(payload) and frame == payload
