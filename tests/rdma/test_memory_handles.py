"""Local memory handles (`memory.LocalMemoryHandle`) and the cache of them in
`monarch._src.rdma.rdma`: byte access, weak handles tied to the backing's life, cache reuse.
In-process; no procs."""

from __future__ import annotations

import gc

import pytest
import torch

from monarch._src.rdma import rdma as api
from monarch._src.rdma.memory import (
    LocalMemoryHandle,
    WeakLocalMemoryHandle,
    handle_from_memoryview,
    handle_from_tensor,
)

pytestmark = pytest.mark.timeout(60)


def test_byte_access_reads_and_writes_the_users_memory() -> None:
    ba = bytearray(b"abcdefgh")
    h = handle_from_memoryview(memoryview(ba))
    assert (h.size, h.device) == (8, "cpu")
    assert h.read_at(2, 3) == b"cde"
    h.write_at(6, b"XY")
    assert bytes(ba) == b"abcdefXY"
    h.write_at(8, b"")  # an empty write at the end fits


@pytest.mark.parametrize(("offset", "size"), [(-1, 1), (7, 2), (0, 9), (9, 0)])
def test_byte_access_outside_the_region_raises_runtime_error(offset: int, size: int) -> None:
    h = handle_from_memoryview(memoryview(bytearray(8)))
    with pytest.raises(RuntimeError, match="outside the handle's 8 bytes"):
        h.read_at(offset, size)
    with pytest.raises(RuntimeError, match="outside the handle's 8 bytes"):
        h.write_at(offset, bytes(size))


def test_write_into_read_only_memory_is_refused() -> None:
    h = handle_from_memoryview(memoryview(b"fixed"))
    assert h.read_at(0, 5) == b"fixed"
    with pytest.raises(ValueError, match="read-only"):
        h.write_at(0, b"x")


def test_tensor_handle_addresses_the_tensor_and_keeps_it_alive() -> None:
    t = torch.arange(16, dtype=torch.int32)
    h = handle_from_tensor(t[4:8])
    assert h.addr == t.data_ptr() + 16 and h.size == 16
    del t
    gc.collect()
    assert h.read_at(0, 4) == (4).to_bytes(4, "little")


def test_weak_handle_lives_with_the_backing_not_with_strong_handles() -> None:
    ba = bytearray(b"0123")
    mv = memoryview(ba)
    weak = handle_from_memoryview(mv).downgrade()  # the strong handle is gone at once
    assert isinstance(weak, WeakLocalMemoryHandle)
    again = weak.upgrade()
    assert isinstance(again, LocalMemoryHandle) and again.read_at(0, 4) == b"0123"
    del again, mv
    gc.collect()
    assert weak.upgrade() is None  # the memoryview (the backing) was collected


def test_weak_handle_of_a_tensor_follows_its_storage() -> None:
    t = torch.zeros(8, dtype=torch.uint8)
    weak = handle_from_tensor(t.view(torch.uint8)).downgrade()  # a transient view
    up = weak.upgrade()
    assert up is not None and up.addr == t.data_ptr()
    del up, t
    gc.collect()
    assert weak.upgrade() is None


def test_cache_reuses_the_registration_until_the_backing_goes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = api._make_local_memory_handle_from_tensor

    def counting(t: torch.Tensor) -> LocalMemoryHandle:
        made.append(t.numel())  # not the tensor: it would keep the storage alive
        return real(t)

    monkeypatch.setattr(api, "_make_local_memory_handle_from_tensor", counting)
    t = torch.ones(32, dtype=torch.uint8)
    first = api._make_local_memory_handle(t)
    del first
    second = api._make_local_memory_handle(t[:])  # another view of the same storage and bytes
    assert len(made) == 1 and second.addr == t.data_ptr()
    assert api._make_local_memory_handle(t[:16]).size == 16  # other bytes: another entry
    assert len(made) == 2
    keys = [k for k in api._local_memory_cache if k[1] == t.data_ptr()]
    del t, second
    gc.collect()
    assert not [k for k in keys if k in api._local_memory_cache]


def test_cache_refuses_what_is_not_local_memory() -> None:
    with pytest.raises(ValueError, match="1d contiguous"):
        api._make_local_memory_handle(bytearray(4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1d contiguous"):
        api._make_local_memory_handle(torch.zeros(2, 2))
