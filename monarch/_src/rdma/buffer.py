"""`RdmaBuffer` and `RdmaAction`: registered buffers and batches of transfers, under the
user-facing `RDMABuffer` / `RDMAAction` of `monarch._src.rdma.rdma` (torchmonarch's native
`_RdmaBuffer` / `_RdmaAction`, reached there through `monarch._rust_bindings.rdma`).

`RdmaBuffer.create` registers a `LocalMemoryHandle`'s memory (without copying) with the proc's
manager and holds the handle, so the memory stays alive; the object pickles to its
`BufferHandle` only, so it travels cheaply in messages. Any holder can then read or write the
owner's memory through an `RdmaAction`; the owner's endpoints never run. Argument errors (sizes,
layouts, read-only memory) are raised synchronously when an operation is added; `submit` checks
drops synchronously and returns a `concurrent.futures.Future` at once, the bytes moving on the
RDMA worker pool. Each call may be given a *readiness* future (the RDMA managers of the
caller's proc mesh starting, `readiness.init_mesh`): nothing is registered, moved or dropped
before it resolves, and its failure is the call's.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from monarch._src.lowlevel import LARGE_TRANSFER, Progress
from monarch._src.rdma import transfer
from monarch._src.rdma.backend import (
    RDMAReadTransferWarning,
    RDMAWriteTransferWarning,
)
from monarch._src.rdma.handle import BufferHandle
from monarch._src.rdma.hostinfo import host_identity, process_start_time
from monarch._src.rdma.memory import LocalMemoryHandle, Region
from monarch._src.rdma.readiness import INIT_TIMEOUT_S
from monarch._src.rdma.verbs import RemoteKey

__all__ = ["RdmaAction", "RdmaBuffer", "Ready", "check_timeout"]

# The managers of the caller's proc mesh starting (`readiness.init_mesh`); None: no wait.
Ready = concurrent.futures.Future[None] | None

_staging_warned: set[type[Warning]] = set()


def check_timeout(timeout: float, what: str) -> float:
    """`timeout` as seconds: a positive number; Monarch's OverflowError when negative."""
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


def _run(ops: list[transfer.Op], timeout: float) -> concurrent.futures.Future[None]:
    """Run `ops` concurrently on the worker pool; the future fails with the first error."""
    deadline = time.monotonic() + timeout
    pool = transfer.worker_pool()
    result: concurrent.futures.Future[None] = concurrent.futures.Future()
    if not ops:
        result.set_result(None)
        return result
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
    return result


def _wait_ready(ready: Ready) -> None:
    """Block until `ready` resolves; its failure raised."""
    if ready is None:
        return
    try:
        ready.result(timeout=2 * INIT_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(
            "The RDMA managers of this proc mesh did not start in time; check that its procs "
            "are alive."
        ) from None


def _after(ready: Ready, start: Callable[[], concurrent.futures.Future[None]]
           ) -> concurrent.futures.Future[None]:
    """`start()` once `ready` resolved (at once when it has); fails with `ready`'s failure."""
    if ready is None:
        return start()
    out: concurrent.futures.Future[None] = concurrent.futures.Future()

    def chain(src: concurrent.futures.Future[None]) -> None:
        if not out.set_running_or_notify_cancel():
            return
        exc = src.exception()
        if exc is not None:
            out.set_exception(exc)
            return
        try:
            inner = start()
        except Exception as err:  # noqa: BLE001 - the caller's future carries it
            out.set_exception(err)
            return
        inner.add_done_callback(lambda f: _copy(f, out))

    ready.add_done_callback(chain)
    return out


def _copy(src: concurrent.futures.Future[None], dst: concurrent.futures.Future[None]) -> None:
    exc = src.exception()
    if exc is not None:
        dst.set_exception(exc)
    else:
        dst.set_result(None)


def _failed(exc: BaseException) -> concurrent.futures.Future[None]:
    out: concurrent.futures.Future[None] = concurrent.futures.Future()
    out.set_exception(exc)
    return out


def _done() -> concurrent.futures.Future[None]:
    out: concurrent.futures.Future[None] = concurrent.futures.Future()
    out.set_result(None)
    return out


class RdmaBuffer:
    """One registered buffer: made by `create` in the owning process, or unpickled from its
    handle anywhere else."""

    def __init__(self, handle: BufferHandle, local: LocalMemoryHandle | None) -> None:
        self._handle = handle
        self._local = local  # keeps the registered memory alive; None in received copies
        self._dropped = False  # set by drop() through this object

    @classmethod
    def create(cls, local: LocalMemoryHandle, owner: str, ready: Ready = None) -> RdmaBuffer:
        """Register `local`'s memory (not empty) for actor `owner`, once `ready` resolved."""
        region = local.region
        if region.nbytes == 0:
            raise ValueError("Cannot create RDMABuffer with size 0.")
        _wait_ready(ready)
        from monarch._src.rdma.manager import get_manager

        mgr = get_manager()
        mirror: Any = None
        host_addr = region.addr
        if region.device != "cpu":
            from monarch._src.rdma import cuda

            cuda.warn_allocator()
            mirror = cuda.mirror_for(region.keepalive)
            host_addr = int(mirror.data_ptr())
        bid, entry = mgr.register(region, host_addr, mirror)
        pid = os.getpid()
        start = process_start_time(pid)
        handle = BufferHandle(
            buffer_id=bid, token=entry.token, owner=owner, owner_addr=mgr.rt.address, pid=pid,
            start_time=start if start is not None else -1, host=host_identity(), addr=host_addr,
            nbytes=region.nbytes, slot_addr=mgr.slot_addr(entry.slot), tcp=mgr.tcp.endpoint,
            writable=region.writable, device=region.device,
            ib=None if entry.mr is None else RemoteKey(int(entry.mr.rkey), host_addr),
        )
        return cls(handle, local)

    @classmethod
    def from_handle(cls, handle: BufferHandle) -> RdmaBuffer:
        """A holder's copy of the buffer `handle` describes (it keeps no memory alive)."""
        return cls(handle, None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RdmaBuffer.from_handle, (self._handle,))

    def __repr__(self) -> str:
        return f"<RdmaBuffer: {self._handle.describe()}>"

    @property
    def handle(self) -> BufferHandle:
        """What this buffer pickles to."""
        return self._handle

    @property
    def local(self) -> LocalMemoryHandle | None:
        """The registered memory in the owner's object; None in received copies."""
        return self._local

    def size(self) -> int:
        """The buffer's length in bytes."""
        return self._handle.nbytes

    def owner_actor_id(self) -> str:
        """The id string of the actor that created the buffer."""
        return self._handle.owner

    @property
    def plane(self) -> str:
        """The data plane a transfer from this process uses: "process_vm", "shm", "tcp",
        "ibverbs", or "none" when the buffer cannot be reached from here."""
        try:
            return transfer.choose_plane(self._handle)
        except (RuntimeError, ValueError):
            return "none"

    def op(self, write: bool, local: LocalMemoryHandle) -> transfer.Op:
        """The transfer between this buffer and `local` (checked now)."""
        if not isinstance(local, LocalMemoryHandle):
            raise TypeError(
                f"An RDMA operation's local memory must be a LocalMemoryHandle, not "
                f"{type(local).__name__}."
            )
        h = self._handle
        region = local.region
        # Monarch's texts for the two size errors.
        if not write and region.nbytes < h.nbytes:
            raise ValueError(
                f"destination local memory size ({region.nbytes}) must be >= remote buffer size "
                f"({h.nbytes})"
            )
        if write and region.nbytes > h.nbytes:
            raise ValueError(
                f"source local memory size ({region.nbytes}) must be <= remote buffer size "
                f"({h.nbytes})"
            )
        if not write and not region.writable:
            raise ValueError(
                "The read destination is read-only; pass a memoryview over writable memory."
            )
        if write and not h.writable:
            raise ValueError(f"{h.describe()} is over read-only memory; it cannot be written.")
        _warn_staging(RDMAWriteTransferWarning if write else RDMAReadTransferWarning, h, region)
        return transfer.Op(write, h, region, h.nbytes if not write else region.nbytes)

    def dropped_error(self) -> Exception | None:
        """The error a transfer through this object raises once it dropped the buffer."""
        return transfer.dropped_error(self._handle) if self._dropped else None

    def drop(self, ready: Ready = None) -> concurrent.futures.Future[None]:
        """Release the registration (once `ready` resolved); later transfers through any
        handle of it fail. Dropping twice through this object does nothing more."""
        h = self._handle
        if self._dropped:
            return _done()
        self._dropped = True

        def release() -> concurrent.futures.Future[None]:
            from monarch._src.rdma.manager import manager_if_started

            mgr = manager_if_started()
            if mgr is not None and h.pid == os.getpid() and h.host == host_identity():
                mgr.drop(h.buffer_id, h.token)
                self._local = None
                return _done()
            from monarch._src.rdma.control import ask
            from monarch._src.rdma.control_ops import RdmaDrop

            return transfer.worker_pool().submit(
                ask, h.owner_addr, RdmaDrop(h.buffer_id, h.token), 60.0)

        return _after(ready, release)


class RdmaAction:
    """A batch of reads and writes, to one or many owners, submitted together (re-submittable)."""

    def __init__(self) -> None:
        # (buffer, local memory, write?) in the order they were added; checked when added.
        self._ops: list[tuple[RdmaBuffer, LocalMemoryHandle, bool]] = []

    def _add(self, remote: RdmaBuffer, local: LocalMemoryHandle, write: bool) -> None:
        if not isinstance(remote, RdmaBuffer):
            raise TypeError(f"RDMAAction needs an RDMABuffer, not {type(remote).__name__}.")
        remote.op(write, local)
        self._ops.append((remote, local, write))

    def add_read_into_local(self, remote: RdmaBuffer, local: LocalMemoryHandle) -> None:
        """Add: read all of `remote` into the leading bytes of `local`."""
        self._add(remote, local, False)

    def add_write_from_local(self, remote: RdmaBuffer, local: LocalMemoryHandle) -> None:
        """Add: write all of `local` into the leading bytes of `remote`."""
        self._add(remote, local, True)

    def submit(self, timeout: float, ready: Ready = None) -> concurrent.futures.Future[None]:
        """Run every operation concurrently (once `ready` resolved); resolves when all
        finished, fails if any failed. A buffer dropped through its object fails at once."""
        t = check_timeout(timeout, "RDMAAction.submit")
        ops = []
        for buf, local, write in self._ops:
            dropped = buf.dropped_error()
            if dropped is not None:
                return _failed(dropped)
            ops.append(buf.op(write, local))
        return _after(ready, lambda: _run(ops, t))
