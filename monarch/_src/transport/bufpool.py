"""Pooled, pre-faulted receive buffers for large batches: `acquire`, `POOL`.

Why. A large batch (a 64 MiB tensor argument) is read from the socket straight into a buffer of
its own, which then becomes the memory of the arrays and tensors unpickled from it. A fresh
anonymous mapping costs a page fault per 4 KiB page, or, pre-faulted, the kernel zeroing every
page up front; on the virtual machines measured here that took 40-120 ms per 64 MiB, longer
than the transfer itself, and unmapping it again cost a few more. A buffer is therefore reused
once nothing uses its memory any more, and new buffers are backed by transparent huge pages
where the kernel offers them (one fault per 2 MiB instead of 512, and fewer TLB misses while
the kernel copies into them).

How a buffer comes back. `acquire` hands out a writable flat byte memoryview over a pooled
mapping, taken from a fresh *exporter* object (a ctypes array laid over the mapping) made for
this one lease. Every view sliced from it, and every numpy array or torch tensor built on those
views, keeps that exporter alive (through the memoryview's managed buffer, numpy's `base` and
the buffer torch.frombuffer holds). When the last of them is freed, the exporter is freed, and a
weakref callback on it puts the mapping back into the pool. A buffer still referenced by a live
array is thus never handed out again, whichever thread frees that array.

Size classes. A request is rounded up to one of `_STEPS` sizes per power of two (from 64 KiB up,
at most 1/16 larger than asked), so a buffer freed by one message fits the next message of a
similar size. Free buffers stay mapped and faulted in, up to `recv_buffer_pool_bytes` in all (a
config key, default 256 MiB); the least recently freed ones are unmapped first when a freed buffer
does not fit, and a buffer larger than the bound is never kept. 0 turns pooling off: every large
batch then gets a fresh mapping, unmapped when its arrays are freed.

Rejected alternatives: a weakref on the memoryview handed out (slices of it do not keep it
alive, so it would die while arrays still use the memory); polling the mapping's export count
(Python exposes none without trying to close or resize it); Python-level `__buffer__` exporters
(Python 3.12 only).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
import weakref
from collections import OrderedDict
from typing import Final

from monarch._src.config import get as config_get

__all__ = ["POOL", "POOLED_FROM", "BufferPool", "acquire", "receive_buffer", "size_class"]

# Bodies of fewer bytes than this are cheaper as a plain bytearray than as a pooled mapping.
POOLED_FROM: Final = 256 * 1024

# Buffers are rounded up to one of this many sizes per power of two.
_STEPS: Final = 16
_PAGE: Final = mmap.PAGESIZE
_HUGE_PAGE: Final = 2 << 20
_MAP_POPULATE: Final = getattr(mmap, "MAP_POPULATE", 0)
# madvise(2) advice, Linux only (MADV_HUGEPAGE exists nowhere else); Python 3.11's mmap module
# does not name MADV_POPULATE_WRITE (Linux >= 5.14), whose value is 23.
_MADV_HUGEPAGE: Final = getattr(mmap, "MADV_HUGEPAGE", None)
_MADV_POPULATE_WRITE: Final = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def size_class(size: int) -> int:
    """The size of the buffer that serves a request of `size` bytes: a whole number of pages,
    rounded up to one of `_STEPS` sizes per power of two."""
    step = max(_PAGE, (1 << (max(size, 2) - 1).bit_length() - 1) // _STEPS)
    return -(-size // step) * step


def _map(size: int) -> mmap.mmap:
    """A private anonymous mapping of `size` bytes, every page faulted in now (huge pages when
    transparent huge pages are available for it)."""
    if _MADV_HUGEPAGE is None:  # not Linux
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_POPULATE)
    mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if size >= _HUGE_PAGE:
        try:
            mapping.madvise(_MADV_HUGEPAGE)
        except OSError:  # transparent huge pages compiled out or disabled: plain pages
            pass
    try:
        mapping.madvise(_MADV_POPULATE_WRITE)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise  # out of memory: refused now, rather than by the OOM killer later
        # A kernel older than 5.14: touch one byte per page instead.
        mapping[::_PAGE] = bytes(len(range(0, size, _PAGE)))
    return mapping


class _Exporter(ctypes.Array[ctypes.c_ubyte]):
    """A byte array as long as any address space, laid over one pooled mapping for one lease.

    Its only job is to be the object every view of the lease refers to: it is freed exactly
    when the last view, array or tensor on the lease is. One fixed type serves all sizes
    because ctypes caches every array type it creates forever, one per length.
    """

    _type_ = ctypes.c_ubyte
    _length_ = 1 << 47


class _Buffer:
    """One pooled mapping and the anchor that pins its address (a ctypes export of it)."""

    __slots__ = ("address", "anchor", "mapping", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.mapping = _map(size)
        self.anchor = ctypes.c_ubyte.from_buffer(self.mapping)
        self.address = ctypes.addressof(self.anchor)


class BufferPool:
    """Free receive buffers by size class, bounded in total bytes; thread-safe.

    `limit` is the bound in bytes, or None to read `recv_buffer_pool_bytes` on every return
    (so `configure` applies at once). `allocations` and `reuses` count what `acquire` did.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        # Re-entrant: a garbage collection inside the locked part may free a lease, whose
        # callback returns its buffer on this same thread.
        self._lock = threading.RLock()
        self._free: dict[int, list[_Buffer]] = {}  # size class -> free buffers
        self._order: OrderedDict[int, _Buffer] = OrderedDict()  # id -> buffer, oldest first
        # The weak references whose callbacks return leased buffers, by id (a weak reference
        # hashes as its referent, and ctypes arrays are unhashable).
        self._leases: dict[int, weakref.ref[_Exporter]] = {}
        self.free_bytes = 0
        self.allocations = 0
        self.reuses = 0

    @property
    def limit(self) -> int:
        if self._limit is not None:
            return self._limit
        return int(config_get("recv_buffer_pool_bytes"))

    def acquire(self, size: int) -> memoryview:
        """A writable memoryview of exactly `size` bytes (format 'B', page-aligned start), which
        comes back to the pool once it and everything built on it were freed."""
        if size <= 0:
            raise ValueError(f"BufferPool.acquire needs a positive size, got {size}.")
        cls = size_class(size)
        buffer = None
        with self._lock:
            bucket = self._free.get(cls)
            if bucket:
                buffer = bucket.pop()
                del self._order[id(buffer)]
                self.free_bytes -= cls
                self.reuses += 1
        if buffer is None:
            buffer = _Buffer(cls)
            with self._lock:
                self.allocations += 1
        exporter = _Exporter.from_address(buffer.address)
        ref = weakref.ref(exporter, lambda ref: self._release(ref, buffer))
        self._leases[id(ref)] = ref
        return memoryview(exporter)[:size].cast("B")

    def _release(self, ref: weakref.ref[_Exporter], buffer: _Buffer) -> None:
        """The last view of a lease was freed: keep its buffer for the next one if it fits."""
        self._leases.pop(id(ref), None)
        limit = self.limit
        with self._lock:
            if buffer.size > limit:
                return  # unmapped once `buffer` is garbage
            self._free.setdefault(buffer.size, []).append(buffer)
            self._order[id(buffer)] = buffer
            self.free_bytes += buffer.size
            while self.free_bytes > limit:
                _, oldest = self._order.popitem(last=False)
                self._free[oldest.size].remove(oldest)
                self.free_bytes -= oldest.size

    def clear(self) -> None:
        """Unmap every free buffer (leased ones come back as usual)."""
        with self._lock:
            self._free.clear()
            self._order.clear()
            self.free_bytes = 0


POOL: Final = BufferPool()


def acquire(size: int) -> memoryview:
    """A pooled receive buffer of `size` bytes from this process's pool (see `BufferPool`)."""
    return POOL.acquire(size)


def receive_buffer(size: int) -> bytearray | memoryview:
    """A writable buffer to read a received body of `size` bytes into: pooled from
    `POOLED_FROM` bytes up, a fresh bytearray below."""
    return acquire(size) if size >= POOLED_FROM else bytearray(size)


def _after_fork_in_child() -> None:
    # A forked child must not reuse its parent's pages (copy-on-write faults on every one) nor
    # inherit a lock some other thread of the parent held.
    POOL._lock = threading.RLock()
    POOL.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
