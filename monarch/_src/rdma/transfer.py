"""Running one transfer: pick the data plane, move the bytes off the caller's thread, map errors.

Planes, chosen per transfer by `choose_plane`:

* `process_vm` - owner on the same host (same boot id and pid namespace): one-sided kernel copy.
* `shm`        - same host, but the kernel refused process_vm_* once in this process.
* `ibverbs`    - another host, with a verbs device on both ends.
* `tcp`        - another host otherwise, when `rdma_allow_tcp_fallback` is set.

The environment variable `MONARCH_RDMA_FORCE_PLANE` (`process_vm`, `shm`, `tcp` or `ibverbs`)
overrides the choice in the *requesting* process; tests and the benchmark use it to run the real
TCP and shm code paths between procs of one host.

Transfers run on a small pool (`rdma_runtime_worker_threads`), never on the caller's thread or
the runtime loop, so `Future.get()` and `await` both work in actors and on the client.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from monarch._src.config import get as config_get
from monarch._src.rdma import vm
from monarch._src.rdma.backend import is_ibverbs_available
from monarch._src.rdma.control import LazyPool, ask
from monarch._src.rdma.control_ops import RdmaCuda
from monarch._src.rdma.errors import RDMABufferDroppedError
from monarch._src.rdma.handle import BufferHandle
from monarch._src.rdma.hostinfo import host_identity, process_start_time
from monarch._src.rdma.memory import Region
from monarch._src.supervision.errors import SupervisionError

__all__ = ["FORCE_ENV", "PLANES", "Op", "choose_plane", "dropped_error", "run_op", "worker_pool"]

FORCE_ENV = "MONARCH_RDMA_FORCE_PLANE"
PLANES = ("process_vm", "shm", "tcp", "ibverbs")
_VM_CHUNK_MAX = 64 << 20  # bounds how late a timeout or a drop is noticed during one copy

_vm_refused = False  # set once the kernel refused process_vm_* in this process


# The process's RDMA transfer threads.
worker_pool = LazyPool("monarch-rdma")


@dataclass
class Op:
    """One transfer between a remote buffer and local memory."""

    write: bool  # True: local -> remote (write_from); False: remote -> local (read_into)
    handle: BufferHandle  # the remote buffer
    local: Region  # the local memory (at least `nbytes` long)
    nbytes: int  # how many leading bytes move
    # Told the bytes moved as they move (chunk by chunk on process_vm, at the end elsewhere):
    # a `Progress` of a large transfer; None for the others.
    moved: Callable[[int], None] | None = None


def choose_plane(h: BufferHandle) -> str:
    """The data plane a transfer of `h` from this process uses."""
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced:
        if forced not in PLANES:
            raise ValueError(
                f"{FORCE_ENV}={forced!r} is not a plane; use one of {', '.join(PLANES)}, or "
                "unset it."
            )
        if forced == "ibverbs" and (h.ib is None or not is_ibverbs_available()):
            raise RuntimeError(
                f"{FORCE_ENV}=ibverbs, but {h.describe()} has no verbs registration or this "
                "process has no verbs device."
            )
        if forced in ("process_vm", "shm") and h.host != host_identity():
            raise RuntimeError(
                f"{FORCE_ENV}={forced} needs the owner of {h.describe()} on this host; it is not."
            )
        return forced
    if h.host == host_identity():
        return "shm" if _vm_refused else "process_vm"
    if h.ib is not None and is_ibverbs_available():
        return "ibverbs"
    if config_get("rdma_allow_tcp_fallback") and h.tcp is not None:
        return "tcp"
    raise RuntimeError(
        f"{h.describe()} is on another host and cannot be reached: there is no ibverbs device "
        "and the TCP fallback is disabled. Call monarch.configure(rdma_allow_tcp_fallback=True)."
    )


def _owner_gone(h: BufferHandle, why: str) -> SupervisionError:
    return SupervisionError(
        f"The owner of {h.describe()} (pid {h.pid} at {h.owner_addr}) is gone: {why}."
    )


def dropped_error(h: BufferHandle) -> RDMABufferDroppedError:
    return RDMABufferDroppedError(
        f"{h.describe()} was dropped; its memory may no longer be read or written. "
        "Ask the owner for a new buffer."
    )


def run_op(op: Op, deadline: float) -> None:
    """Move the bytes of `op` (on a worker thread); TimeoutError past `deadline`."""
    try:
        _run_op(op, deadline)
    except SupervisionError as exc:
        if str(exc).startswith("The owner of"):
            raise
        # A control round trip (shm, CUDA staging) failed because the owner's proc died.
        raise _owner_gone(op.handle, str(exc).rstrip(".")) from exc


def _run_op(op: Op, deadline: float) -> None:
    h = op.handle
    from monarch._src.lowlevel import runtime_if_started

    rt = runtime_if_started()
    if rt is not None and rt.mailbox.is_dead(h.owner_addr):
        raise _owner_gone(h, "its process has exited")
    staged: Any = None
    local_addr = op.local.addr
    if op.local.device != "cpu" and op.nbytes:
        from monarch._src.rdma import cuda

        staged = cuda.pinned_like(op.nbytes)
        local_addr = staged.data_ptr()
        if op.write:
            staged.copy_(cuda.as_bytes(op.local.keepalive)[: op.nbytes])
    if h.device != "cpu" and not op.write:
        _stage_remote(h, False, op.nbytes, deadline)
    _move(op.write, h, local_addr, op.nbytes, deadline, op.moved)
    if h.device != "cpu" and op.write:
        _stage_remote(h, True, op.nbytes, deadline)
    if staged is not None and not op.write:
        from monarch._src.rdma import cuda

        cuda.as_bytes(op.local.keepalive)[: op.nbytes].copy_(staged)


def _stage_remote(h: BufferHandle, to_device: bool, n: int, deadline: float) -> None:
    try:
        ask(h.owner_addr, RdmaCuda(h.buffer_id, h.token, to_device, n),
            deadline - time.monotonic())
    except RDMABufferDroppedError as exc:
        raise dropped_error(h) from exc


def _move(write: bool, h: BufferHandle, local: int, n: int, deadline: float,
          moved: Callable[[int], None] | None = None) -> None:
    global _vm_refused
    plane = choose_plane(h)
    if plane == "process_vm":
        try:
            _vm_move(write, h, local, n, deadline, moved)
            return
        except vm.VmRefused:
            if os.environ.get(FORCE_ENV):
                raise
            _vm_refused = True
            plane = "shm"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError(f"The transfer of {h.describe()} timed out before it started.")
    if plane == "shm":
        from monarch._src.rdma import shm

        try:
            (shm.shm_write if write else shm.shm_read)(h, local, n, remaining)
        except RDMABufferDroppedError as exc:
            raise dropped_error(h) from exc
    elif plane == "tcp":
        _tcp_move(write, h, local, n, remaining)
    else:
        _verbs_move(write, h, local, n, deadline)
    if moved is not None:
        moved(n)


def _verbs_move(write: bool, h: BufferHandle, local: int, n: int, deadline: float) -> None:
    from monarch._src.rdma import verbs

    assert h.ib is not None  # choose_plane picks ibverbs only for handles registered with it
    try:
        verbs.verbs_move(write, h.owner_addr, h.ib, local, n, deadline)
    except verbs.VerbsDropped as exc:
        raise dropped_error(h) from exc
    except verbs.VerbsUnreachable as exc:
        raise _owner_gone(h, f"its queue pair does not answer ({exc})") from exc


def _tcp_move(write: bool, h: BufferHandle, local: int, n: int, timeout: float) -> None:
    from monarch._src.rdma import tcp

    assert h.tcp is not None  # the owner always starts its listener with its manager
    try:
        (tcp.tcp_write if write else tcp.tcp_read)(h.tcp, h.buffer_id, h.token, local, n, timeout)
    except tcp.TcpDropped as exc:
        if "dropped" in str(exc):
            raise dropped_error(h) from exc
        raise RuntimeError(f"The owner of {h.describe()} refused the transfer: {exc}") from exc
    except tcp.TcpUnreachable as exc:
        raise _owner_gone(h, f"its data plane is unreachable ({exc})") from exc


def _vm_move(write: bool, h: BufferHandle, local: int, n: int, deadline: float,
             moved: Callable[[int], None] | None = None) -> None:
    if process_start_time(h.pid) != h.start_time:
        raise _owner_gone(h, "its process has exited")
    word = ctypes.c_uint64(0)
    w = (ctypes.addressof(word), 8)
    slot = (h.slot_addr, 8)
    chunk = max(1, min(_VM_CHUNK_MAX, int(config_get("rdma_max_chunk_size_mb")) << 20))
    try:
        for off in range(0, n, chunk):
            if time.monotonic() > deadline:
                raise TimeoutError(f"The transfer of {h.describe()} timed out.")
            m = min(chunk, n - off)
            if write:
                vm.readv(h.pid, [w], [slot])
                if word.value != h.token:
                    raise dropped_error(h)
                vm.writev(h.pid, [(local + off, m)], [(h.addr + off, m)])
            else:
                # The valid word and the data in one system call: a drop before it is seen here.
                vm.readv(h.pid, [w, (local + off, m)], [slot, (h.addr + off, m)])
                if word.value != h.token:
                    raise dropped_error(h)
            if moved is not None:
                moved(m)
        if not write:
            vm.readv(h.pid, [w], [slot])  # a drop during the copy may have changed the bytes
            if word.value != h.token:
                raise dropped_error(h)
    except vm.VmNoProcess as exc:
        raise _owner_gone(h, "its process has exited") from exc
    except vm.VmFault as exc:
        if process_start_time(h.pid) != h.start_time:
            raise _owner_gone(h, "its process has exited") from exc
        try:
            vm.readv(h.pid, [w], [slot])
        except OSError:
            raise _owner_gone(h, "its process has exited") from exc
        if word.value != h.token:
            raise dropped_error(h) from exc
        raise RuntimeError(f"The memory of {h.describe()} is not mapped in its owner.") from exc
