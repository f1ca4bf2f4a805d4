"""Large numpy and torch arguments between real procs: they arrive intact and writable, are built
on the pooled receive buffer the socket was read into (no copy), and that buffer is reused once
the argument is freed, never while it lives (transport/bufpool.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src import config as internal
from monarch.actor import Actor, ProcMesh, endpoint, this_host
from monarch.config import configured

np = pytest.importorskip("numpy")

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20
GET = 60


def _digest(buffer: Any) -> str:
    return hashlib.sha256(memoryview(buffer).cast("B")).hexdigest()


class Sink(Actor):
    """Receives large arguments and reports what it got, and what its pool did."""

    def __init__(self) -> None:
        self.kept: Any = None

    @endpoint
    def describe(self, x: Any) -> dict[str, Any]:
        if type(x).__module__ == "torch":
            import torch

            flat = x.view(torch.uint8) if x.dtype != torch.uint8 else x
            digest = _digest(flat.contiguous().numpy())
            x.add_(1)  # writable in place, no warning and no copy needed
            return {"kind": "torch", "dtype": str(x.dtype), "shape": tuple(x.shape),
                    "digest": digest, "contiguous": x.is_contiguous()}
        digest = _digest(x)
        writeable = bool(x.flags.writeable)
        x += 1
        return {"kind": "numpy", "dtype": str(x.dtype), "shape": x.shape, "digest": digest,
                "writeable": writeable}

    @endpoint
    def keep(self, x: Any) -> tuple[str, int]:
        """Keep `x`; return its digest and the address of its memory."""
        self.kept = x
        if type(x).__module__ == "torch":
            return _digest(x.numpy()), x.data_ptr()
        return _digest(x), x.__array_interface__["data"][0]

    @endpoint
    def scribble_then_digest(self, y: Any) -> tuple[str, str]:
        """Overwrite the kept argument, then digest the new one: both lived at once."""
        if type(self.kept).__module__ == "torch":
            self.kept.fill_(255)
            return _digest(y.numpy()), _digest(self.kept.numpy())
        self.kept[...] = 255
        return _digest(y), _digest(self.kept)

    @endpoint
    def drop(self) -> None:
        self.kept = None

    @endpoint
    def pool(self) -> tuple[int, int, int]:
        from monarch._src.transport.bufpool import POOL

        return POOL.allocations, POOL.reuses, POOL.free_bytes

    @endpoint
    def in_free_buffer(self, address: int) -> bool:
        """Whether `address` lies in a buffer of the pool that is free (may be handed out)."""
        from monarch._src.transport.bufpool import POOL

        return any(b.address <= address < b.address + b.size for b in POOL._order.values())


@pytest.fixture(scope="module")
def sink() -> Iterator[Any]:
    procs: ProcMesh = this_host().spawn_procs(per_host={"procs": 1})
    try:
        yield procs.spawn("bulk_sink", Sink)
    finally:
        procs.stop().get(timeout=GET)


def _array(seed: int, shape: tuple[int, ...] = (1024, 2048), dtype: str = "float32") -> Any:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 100, size=shape).astype(dtype)


def test_a_large_numpy_argument_arrives_intact_and_writable(sink: Any) -> None:
    array = _array(1)
    got = sink.describe.call_one(array).get(timeout=GET)
    assert got == {"kind": "numpy", "dtype": "float32", "shape": (1024, 2048),
                   "digest": _digest(array), "writeable": True}


def test_a_large_torch_argument_arrives_intact_and_writable(sink: Any) -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.from_numpy(_array(2, (512, 4096), "int16"))
    got = sink.describe.call_one(tensor).get(timeout=GET)
    assert got == {"kind": "torch", "dtype": "torch.int16", "shape": (512, 4096),
                   "digest": _digest(tensor.numpy()), "contiguous": True}


def test_the_receive_buffer_is_reused_once_the_argument_is_freed(sink: Any) -> None:
    array = _array(3)
    sink.describe.call_one(array).get(timeout=GET)  # a buffer of this size class exists now
    allocations, reuses, _ = sink.pool.call_one().get(timeout=GET)
    for _ in range(6):
        sink.describe.call_one(array).get(timeout=GET)
    after = sink.pool.call_one().get(timeout=GET)
    # The reply leaves before the actor thread lets go of the argument, so a call may arrive
    # while the previous buffer is still held: at most one more buffer, reused from then on.
    assert after[0] - allocations <= 1
    assert after[1] - reuses >= 5


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_kept_argument_pins_its_buffer_and_the_next_one_is_intact(sink: Any, kind: str) -> None:
    first, second = _array(4), _array(5)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        first, second = torch.from_numpy(first), torch.from_numpy(second)
    as_numpy = (lambda t: t.numpy()) if kind == "torch" else (lambda a: a)
    digest, address = sink.keep.call_one(first).get(timeout=GET)
    assert digest == _digest(as_numpy(first))
    assert not sink.in_free_buffer.call_one(address).get(timeout=GET)
    got, scribbled = sink.scribble_then_digest.call_one(second).get(timeout=GET)
    assert got == _digest(as_numpy(second))
    assert scribbled == _digest(np.full((1024, 2048), 255, dtype="float32"))
    sink.drop.call_one().get(timeout=GET)
    # Once dropped, the memory the argument lived in is a free pooled buffer: it was built on
    # the buffer the socket was read into, not copied out of it.
    assert sink.in_free_buffer.call_one(address).get(timeout=GET)


def test_recv_buffer_pool_bytes_zero_turns_reuse_off_in_procs() -> None:
    saved = internal.runtime_snapshot()
    try:
        with configured(recv_buffer_pool_bytes=0):
            procs = this_host().spawn_procs(per_host={"procs": 1})
        try:
            sink = procs.spawn("bulk_sink_unpooled", Sink)
            array = _array(6)
            for _ in range(3):
                sink.describe.call_one(array).get(timeout=GET)
            allocations, reuses, free = sink.pool.call_one().get(timeout=GET)
            assert (allocations, reuses, free) == (3, 0, 0)
        finally:
            procs.stop().get(timeout=GET)
    finally:
        internal.apply_snapshot(saved)
