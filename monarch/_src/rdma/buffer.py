"""`RDMABuffer` and `RDMAAction`: the user-facing halves of the RDMA API.

An `RDMABuffer` made in the owning actor registers memory (without copying) with the proc's
manager and holds the memory; the object pickles to its `BufferHandle` only, so it travels
cheaply in messages. Any holder can then `read_into` / `write_from` the owner's memory; the owner's
endpoints never run. Every transfer returns a monarch `Future` at once and runs on the RDMA worker
pool; argument errors (sizes, layouts) are raised synchronously, before anything is queued.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
import warnings
from typing import Any

from monarch._src.lowlevel import LARGE_TRANSFER, Future, Progress
from monarch._src.rdma import transfer
from monarch._src.rdma.backend import (
    RDMAReadTransferWarning,
    RDMAWriteTransferWarning,
    get_rdma_backend,
    warn_tcp_fallback_once,
)
from monarch._src.rdma.handle import BufferHandle
from monarch._src.rdma.hostinfo import host_identity, process_start_time
from monarch._src.rdma.memory import Region, as_region
from monarch._src.rdma.verbs import RemoteKey

__all__ = ["RDMAAction", "RDMABuffer"]

_staging_warned: set[type[Warning]] = set()


def _check_timeout(timeout: float, what: str) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"{what} timeout must be a positive number of seconds, not {timeout!r}.")
    if timeout < 0:
        # Monarch's error: its timeout is an unsigned 64-bit count of seconds.
        raise OverflowError("timeout must fit in an unsigned 64-bit integer")
    if not timeout > 0:
        raise ValueError(f"{what} timeout must be a positive number of seconds, not {timeout!r}.")
    return float(timeout)


def _warn_staging(kind: type[Warning], h: BufferHandle, local: Region) -> None:
    if (h.device == "cpu" and local.device == "cpu") or kind in _staging_warned:
        return
    _staging_warned.add(kind)
    warnings.warn(
        "CUDA memory in an RDMA transfer is staged through pinned host memory (no GPUDirect "
        "path); expect host-memory bandwidth.",
        kind,
        stacklevel=3,
    )


def _progress(ops: list[transfer.Op]) -> Progress | None:
    """A `Progress` of the bytes `ops` move when they are `LARGE_TRANSFER` or more (None
    otherwise: small transfers create nothing), told of each chunk as it moves."""
    total = sum(op.nbytes for op in ops)
    if total < LARGE_TRANSFER:
        return None
    kinds = {op.write for op in ops}
    title = "RDMA transfer" if len(kinds) > 1 else "RDMA write" if True in kinds else "RDMA read"
    progress = Progress(title, total, "B")
    if progress.active:
        for op in ops:
            op.moved = progress.advance
    return progress


def _submit(ops: list[transfer.Op], timeout: float) -> Future[None]:
    """Run `ops` concurrently on the worker pool; the future fails with the first error."""
    deadline = time.monotonic() + timeout
    pool = transfer.worker_pool()
    result: concurrent.futures.Future[Any] = concurrent.futures.Future()
    if not ops:
        result.set_result(None)
        return Future.from_concurrent(result)
    lock = threading.Lock()
    left = [len(ops)]
    errors: list[BaseException] = []
    progress = _progress(ops)

    def one_done(f: concurrent.futures.Future[None]) -> None:
        exc = f.exception()
        with lock:
            if exc is not None:
                errors.append(exc)
            left[0] -= 1
            finished = left[0] == 0
        if finished:
            if progress is not None:
                progress.close(errors[0] if errors else None)
            if errors:
                result.set_exception(errors[0])
            else:
                result.set_result(None)

    for op in ops:
        pool.submit(transfer.run_op, op, deadline).add_done_callback(one_done)
    return Future.from_concurrent(result)


class RDMABuffer:
    """Memory registered for one-sided reads and writes by other procs.

    Make it in the actor that owns the memory, from a 1-D contiguous tensor (CPU or CUDA) or a
    1-D C-contiguous memoryview; the buffer keeps that object alive. Pass it in messages freely:
    only a small handle travels.
    """

    def __init__(self, data: Any) -> None:
        region = as_region(data, "RDMABuffer data")
        backend = get_rdma_backend()
        if backend == "none":
            raise RuntimeError(
                "Tried to create an RDMABuffer, but RDMA is not available on this platform. To "
                "enable TCP fallback transport, call monarch.configure(rdma_allow_tcp_fallback="
                "True) before creating buffers."
            )
        if backend == "tcp":
            warn_tcp_fallback_once()
        from monarch._src.mesh.context import context
        from monarch._src.rdma.manager import get_manager

        owner = context().actor_instance.actor_id
        mgr = get_manager()
        mirror: Any = None
        host_addr = region.addr
        if region.device != "cpu":
            from monarch._src.rdma import cuda

            cuda.warn_allocator()
            mirror = cuda.mirror_for(data)
            host_addr = int(mirror.data_ptr())
        bid, entry = mgr.register(region, host_addr, mirror)
        pid = os.getpid()
        start = process_start_time(pid)
        self._handle = BufferHandle(
            buffer_id=bid, token=entry.token, owner=owner, owner_addr=mgr.rt.address, pid=pid,
            start_time=start if start is not None else -1, host=host_identity(), addr=host_addr,
            nbytes=region.nbytes, slot_addr=mgr.slot_addr(entry.slot), tcp=mgr.tcp.endpoint,
            writable=region.writable, device=region.device,
            ib=None if entry.mr is None else RemoteKey(int(entry.mr.rkey), host_addr),
        )
        self._data: Any = data  # keeps the registered memory alive; None in received copies
        self._dropped = False  # set by drop() through this object

    @classmethod
    def _from_handle(cls, handle: BufferHandle) -> RDMABuffer:
        buf = object.__new__(cls)
        buf._handle = handle
        buf._data = None
        buf._dropped = False
        return buf

    def __reduce__(self) -> tuple[Any, ...]:
        return (RDMABuffer._from_handle, (self._handle,))

    def __repr__(self) -> str:
        # Monarch's default object repr, under its module path; `describe()` of the handle is
        # what our own error messages use.
        return f"<monarch._src.rdma.rdma.RDMABuffer object at {id(self):#x}>"

    # ---- properties -------------------------------------------------------------------------
    def size(self) -> int:
        """The buffer's length in bytes."""
        return self._handle.nbytes

    @property
    def owner(self) -> str:
        """The id string of the actor that created the buffer."""
        return self._handle.owner

    @property
    def backend(self) -> str:
        """The RDMA backend, as `get_rdma_backend()` says: "ibverbs", "tcp" or "none"."""
        return get_rdma_backend()

    @property
    def _plane(self) -> str:
        """The data plane a transfer from this process uses: "process_vm", "shm", "tcp",
        "ibverbs", or "none" when the buffer cannot be reached from here."""
        try:
            return transfer.choose_plane(self._handle)
        except (RuntimeError, ValueError):
            return "none"

    # ---- transfers --------------------------------------------------------------------------
    def _op(self, write: bool, local_obj: Any, what: str) -> transfer.Op:
        h = self._handle
        local = as_region(local_obj, what, allow_empty=True, need_writable=not write)
        # Monarch's texts for the two size errors.
        if not write and local.nbytes < h.nbytes:
            raise ValueError(
                f"destination local memory size ({local.nbytes}) must be >= remote buffer size "
                f"({h.nbytes})"
            )
        if write and local.nbytes > h.nbytes:
            raise ValueError(
                f"source local memory size ({local.nbytes}) must be <= remote buffer size "
                f"({h.nbytes})"
            )
        if write and not h.writable:
            raise ValueError(f"{h.describe()} is over read-only memory; it cannot be written.")
        _warn_staging(RDMAWriteTransferWarning if write else RDMAReadTransferWarning, h, local)
        return transfer.Op(write, h, local, h.nbytes if not write else local.nbytes)

    def _dropped_future(self) -> Future[None] | None:
        if not self._dropped:
            return None
        return Future.from_exception(transfer._dropped(self._handle))

    def read_into(self, dst: Any, *, timeout: float = 60) -> Future[None]:
        """Copy the whole buffer into the leading bytes of local `dst` (1-D contiguous)."""
        t = _check_timeout(timeout, "read_into")
        op = self._op(False, dst, "The read_into destination")
        return self._dropped_future() or _submit([op], t)

    def write_from(self, src: Any, *, timeout: float = 60) -> Future[None]:
        """Copy local `src` (1-D contiguous, at most `size()` bytes) into the leading bytes."""
        t = _check_timeout(timeout, "write_from")
        op = self._op(True, src, "The write_from source")
        return self._dropped_future() or _submit([op], t)

    def drop(self) -> Future[None]:
        """Release the registration; later transfers through any handle of it fail."""
        h = self._handle
        if self._dropped:
            return Future.from_value(None)
        self._dropped = True
        from monarch._src.rdma.manager import manager_if_started

        mgr = manager_if_started()
        if mgr is not None and h.pid == os.getpid() and h.host == host_identity():
            mgr.drop(h.buffer_id, h.token)
            self._data = None
            return Future.from_value(None)
        from monarch._src.rdma.control import ask

        return Future.from_concurrent(transfer.worker_pool().submit(
            ask, h.owner_addr, "rdma_drop", (h.buffer_id, h.token), 60.0))


class RDMAAction:
    """A batch of reads and writes, to one or many owners, submitted together (re-submittable)."""

    def __init__(self) -> None:
        # (buffer, local object, write?) in the order they were added; checked when added.
        self._ops: list[tuple[RDMABuffer, Any, bool]] = []

    def read_remote(self, dst_local: Any, src_buffer: RDMABuffer) -> RDMAAction:
        """Add: read all of `src_buffer` into the leading bytes of `dst_local`."""
        self._add(src_buffer, dst_local, False)
        return self

    def write_remote(self, dst_buffer: RDMABuffer, src_local: Any) -> RDMAAction:
        """Add: write `src_local` into the leading bytes of `dst_buffer`."""
        self._add(dst_buffer, src_local, True)
        return self

    def _add(self, buf: RDMABuffer, local: Any, write: bool) -> None:
        if not isinstance(buf, RDMABuffer):
            raise TypeError(f"RDMAAction needs an RDMABuffer, not {type(buf).__name__}.")
        what = "The RDMAAction write source" if write else "The RDMAAction read destination"
        buf._op(write, local, what)
        self._ops.append((buf, local, write))

    def fetch_add(self, *args: Any, **kwargs: Any) -> RDMAAction:
        """Not supported (as on Monarch 0.7.0)."""
        raise NotImplementedError("Not yet supported")

    def compare_and_swap(self, *args: Any, **kwargs: Any) -> RDMAAction:
        """Not supported (as on Monarch 0.7.0)."""
        raise NotImplementedError("Not yet supported")

    def submit(self, *, timeout: float = 60) -> Future[None]:
        """Run every operation concurrently; resolves when all finished, fails if any failed."""
        t = _check_timeout(timeout, "RDMAAction.submit")
        ops = []
        for buf, local, write in self._ops:
            dropped = buf._dropped_future()
            if dropped is not None:
                return dropped
            ops.append(buf._op(write, local, "An RDMAAction local buffer"))
        return _submit(ops, t)
