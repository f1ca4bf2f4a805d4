"""Same-host fallback when the kernel refuses process_vm_*: copies through a shared segment.

Registration stays zero-copy: the owner's memory is the user's tensor, and moving it into shared
memory at registration would break the aliasing users rely on (writes into the buffer must show
up in their tensor). The price is paid only on this fallback path, per transfer: the requester
owns a segment in /dev/shm; for each chunk it asks the owner (control op `rdma_shm`, served on the
owner's RDMA worker threads, not its endpoints) to copy between the registered memory and the
segment, and copies between the segment and its local memory itself. Two copies and a control
round trip per chunk, against one copy for process_vm_*; still no sockets.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
from typing import TYPE_CHECKING

from monarch._src.lowlevel import SHM_DIR, SHM_PREFIX, owned_name, sweep_ended
from monarch._src.rdma.control import ask
from monarch._src.rdma.control_ops import RdmaShm

if TYPE_CHECKING:
    from monarch._src.rdma.handle import BufferHandle
    from monarch._src.rdma.manager import Manager

__all__ = ["serve_copy", "shm_read", "shm_write"]

CHUNK = 64 << 20
_SUFFIX = "-rdma"
_lock = threading.Lock()  # one fallback transfer at a time per process uses the segment
_segment: tuple[str, mmap.mmap, int] | None = None  # (name, mapping, its address)


def _address(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def _get_segment() -> tuple[str, int]:
    global _segment
    if _segment is None:
        sweep_ended()  # what killed processes left, this host's whole life included
        name = owned_name(SHM_PREFIX, _SUFFIX)
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, CHUNK)
            m = mmap.mmap(fd, CHUNK)
        finally:
            os.close(fd)
        _segment = (name, m, _address(m))
        import atexit

        atexit.register(_unlink, path)
    return _segment[0], _segment[2]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # removed already (by its owner or the reader that finished with it)


def _run(h: BufferHandle, write: bool, local: int, length: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with _lock:
        name, seg = _get_segment()
        for off in range(0, length, CHUNK):
            n = min(CHUNK, length - off)
            if write:
                ctypes.memmove(seg, local + off, n)
            ask(h.owner_addr, RdmaShm(h.buffer_id, h.token, write, off, n, name),
                deadline - time.monotonic())
            if not write:
                ctypes.memmove(local + off, seg, n)


def shm_read(h: BufferHandle, local: int, length: int, timeout: float) -> None:
    """Read the leading `length` bytes of `h` into local address `local` through the segment."""
    _run(h, False, local, length, timeout)


def shm_write(h: BufferHandle, local: int, length: int, timeout: float) -> None:
    """Write `length` bytes from local address `local` into `h` through the segment."""
    _run(h, True, local, length, timeout)


def serve_copy(manager: Manager, bid: int, token: int, write: bool, offset: int, length: int,
               name: str) -> None:
    """Owner side of `rdma_shm`: copy between buffer `bid` and the requester's segment."""
    addr = manager.resolve(bid, token, offset, length, write)
    if "/" in name or not (name.startswith(SHM_PREFIX) and name.endswith(_SUFFIX)):
        raise ValueError(f"{name!r} is not an RDMA shared-memory segment name.")
    fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
    try:
        m = mmap.mmap(fd, length)
    finally:
        os.close(fd)
    try:
        seg = _address(m)
        if write:
            ctypes.memmove(addr, seg, length)
        else:
            ctypes.memmove(seg, addr, length)
    finally:
        m.close()
