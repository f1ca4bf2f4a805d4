"""The in-memory block mount: torchmonarch's `chunked_fuse` binding, in Python.

A mount starts with the tree and no bytes. A read that needs a block not yet delivered calls
the fault callback (once per block) and parks on a condition until `receive_block` delivers it;
files named stale in a delivery read EIO, others in the same block serve. A parked read that
waits longer than `fault_timeout` fails with EIO instead of hanging its caller.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from monarch._src.mount.fs import ATTR_TTL_S, FuseSession, TreeFS, eio, require_fuse
from monarch._src.mount.layout import BLOCK_SIZE, Index

# How long a read parks on a block before it fails with EIO (seconds).
DEFAULT_FAULT_TIMEOUT_S: float = 120.0


class _Buffer:
    """A BLOCK_SIZE anonymous mapping and its address (stable while the mapping lives)."""

    def __init__(self) -> None:
        self.map = mmap.mmap(-1, BLOCK_SIZE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._anchor = ctypes.c_char.from_buffer(self.map)  # pins the address for ctypes users
        self.address = ctypes.addressof(self._anchor)


class BlockStore:
    """Delivered blocks by id; the parked readers' condition; stale paths."""

    def __init__(self, fault_callback: Callable[[int], Any] | None,
                 fault_timeout: float) -> None:
        self._cond = threading.Condition()
        self._present: dict[int, _Buffer] = {}  # delivered blocks: served from here
        self._reserved: dict[int, _Buffer] = {}  # handed out by block_ptr, not delivered yet
        self._faulted: set[int] = set()  # blocks whose fault callback already ran
        self._stale: set[str] = set()  # vpaths whose delivered bytes are garbage: EIO
        self._callback = fault_callback
        self._timeout = fault_timeout

    def reserve(self, block: int) -> int:
        with self._cond:
            buf = self._reserved.get(block)
            if buf is None:
                buf = self._reserved[block] = _Buffer()
            return buf.address

    def receive(self, block: int, stale: Iterable[str]) -> None:
        with self._cond:
            buf = self._reserved.pop(block, None)
            if buf is None:
                raise ValueError(f"receive_block({block}): no buffer was reserved for it; "
                                 f"call block_ptr({block}) and fill it first.")
            self._present[block] = buf
            self._stale.update(str(p) for p in stale)
            self._cond.notify_all()

    def read(self, vpath: str, node: Mapping[str, Any], offset: int, size: int) -> bytes:
        base = node.get("global_offset")
        if base is None:
            raise eio(f"{vpath} has no place in the pack")
        start = int(base) + offset
        stop = start + size
        out = bytearray()
        pos = start
        while pos < stop:
            block = pos // BLOCK_SIZE
            buf = self._wait_for(vpath, block)
            lo = pos - block * BLOCK_SIZE
            hi = min(stop - block * BLOCK_SIZE, BLOCK_SIZE)
            out += buf.map[lo:hi]
            pos = block * BLOCK_SIZE + hi
        return bytes(out)

    def _wait_for(self, vpath: str, block: int) -> _Buffer:
        deadline = time.monotonic() + self._timeout
        fire = False
        with self._cond:
            if vpath in self._stale:
                raise eio(f"{vpath} changed at its source")
            buf = self._present.get(block)
            if buf is None and block not in self._faulted:
                self._faulted.add(block)
                fire = True
        if fire and self._callback is not None:
            self._callback(block)  # outside the lock: it may deliver synchronously
        with self._cond:
            while True:
                if vpath in self._stale:
                    raise eio(f"{vpath} changed at its source")
                buf = self._present.get(block)
                if buf is not None:
                    return buf
                left = deadline - time.monotonic()
                if left <= 0:
                    self._faulted.discard(block)  # a later read asks again
                    raise eio(f"block {block} of {vpath} was not delivered within "
                              f"{self._timeout:g} s")
                self._cond.wait(left)


class FuseMountHandle:
    """A live in-memory block mount (what `mount_chunked_fuse` returns)."""

    def __init__(self, metadata: Index, total_size: int, mount_point: str,
                 fault_callback: Callable[[int], Any] | None,
                 fault_timeout: float = DEFAULT_FAULT_TIMEOUT_S) -> None:
        require_fuse("mount_chunked_fuse")
        self._store = BlockStore(fault_callback, fault_timeout)
        self._total_size = int(total_size)  # the pack's length; grows on refresh
        self._fs = TreeFS(dict(metadata), self._store)
        self._session = FuseSession(self._fs, mount_point, fsname="monarch-chunked")

    def block_ptr(self, block_id: int) -> int:
        """The address of a BLOCK_SIZE buffer to fill for `block_id` (reserved on first use)."""
        return self._store.reserve(int(block_id))

    def receive_block(self, block_id: int, stale: list[str]) -> None:
        """Serve the filled buffer of `block_id`; the files in `stale` read EIO from now on."""
        self._store.receive(int(block_id), stale)

    def refresh(self, metadata: Index, new_total_size: int) -> None:
        """Serve a new tree (append-only layout: delivered blocks stay valid), then wait until
        the kernel's cached attributes have expired."""
        self._total_size = int(new_total_size)
        self._fs.swap(dict(metadata))
        time.sleep(ATTR_TTL_S * 3)

    def unmount(self) -> None:
        status, detail = self._session.unmount()
        if status not in ("ok", "not_mounted"):
            raise RuntimeError(f"Unmounting {self._session.mountpoint!r} failed ({status}): "
                               f"{detail}")


def mount_chunked_fuse(metadata: Index, total_size: int, mount_point: str,
                       fault_callback: Callable[[int], Any] | None) -> FuseMountHandle:
    """Mount `metadata`'s tree at `mount_point` with no bytes delivered yet."""
    return FuseMountHandle(metadata, total_size, mount_point, fault_callback)
