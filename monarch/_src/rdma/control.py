"""RDMA control operations, carried by the ordinary mailbox as CONTROL envelopes.

Owner side (installed by the manager): `rdma_drop` unregisters a buffer on behalf of a non-owner
handle; `rdma_shm` copies between a registered buffer and a segment the requester named (the
same-host fallback); `rdma_cuda` stages a CUDA buffer through its pinned mirror;
`rdma_ib_connect` sets up a verbs queue pair. Copies run on the owner's RDMA serving threads,
never on the runtime loop. Requester side: `ask()` sends one and waits (`ask_all()` several at
once), bounded, failing with `SupervisionError` at once if the owner's process dies (the port
watches it).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from monarch._src.config import get as config_get
from monarch._src.lowlevel import OncePort, Runtime, control, decode_reply, get_runtime, op_name
from monarch._src.rdma.control_ops import RdmaCuda, RdmaDrop, RdmaIbConnect, RdmaShm

if TYPE_CHECKING:
    from monarch._src.rdma.manager import Manager

__all__ = ["LazyPool", "ask", "ask_all", "install"]


def install(rt: Runtime, manager: Manager) -> None:
    """Register the owner-side RDMA control operations in `rt`'s mailbox."""
    mailbox = rt.mailbox

    def rdma_drop(peer: str, op: RdmaDrop, reply: Any) -> None:
        manager.drop(op.buffer_id, op.token)
        if reply is not None:
            mailbox.reply(reply, None)

    def _offload(copy: Callable[[], None], reply: Any) -> None:
        def run() -> None:
            try:
                copy()
            except Exception as exc:  # noqa: BLE001 - any failure is the requester's answer
                mailbox.reply_error(reply, exc)
            else:
                mailbox.reply(reply, None)

        _serve_pool().submit(run)

    def rdma_shm(peer: str, op: RdmaShm, reply: Any) -> None:
        from monarch._src.rdma.shm import serve_copy

        _offload(lambda: serve_copy(manager, op.buffer_id, op.token, op.write, op.offset,
                                    op.length, op.name), reply)

    def rdma_cuda(peer: str, op: RdmaCuda, reply: Any) -> None:
        from monarch._src.rdma.cuda import serve_stage

        _offload(lambda: serve_stage(manager, op.buffer_id, op.token, op.to_device, op.length),
                 reply)

    def rdma_ib_connect(peer: str, op: RdmaIbConnect, reply: Any) -> None:
        from monarch._src.rdma.verbs import serve_connect

        def run() -> None:
            try:
                mine = serve_connect(op.qp)
            except Exception as exc:  # noqa: BLE001 - any failure is the requester's answer
                mailbox.reply_error(reply, exc)
            else:
                mailbox.reply(reply, mine)

        _serve_pool().submit(run)

    mailbox.control.register(RdmaIbConnect, rdma_ib_connect)
    mailbox.control.register(RdmaDrop, rdma_drop)
    mailbox.control.register(RdmaShm, rdma_shm)
    mailbox.control.register(RdmaCuda, rdma_cuda)


class LazyPool:
    """A thread pool of `rdma_runtime_worker_threads` threads, created on first use."""

    def __init__(self, thread_name_prefix: str) -> None:
        self._prefix = thread_name_prefix
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def __call__(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                n = max(1, int(config_get("rdma_runtime_worker_threads")))
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=n, thread_name_prefix=self._prefix)
            return self._pool


# Separate from the transfer workers: a transfer to a buffer of this very process waits on a
# worker thread for this pool's answer, so sharing one pool could deadlock.
_serve_pool = LazyPool("monarch-rdma-serve")


def ask(owner_addr: str, op: tuple[Any, ...], timeout: float) -> Any:
    """Send control operation `op` (a record of `control_ops.py`) to the owner's proc and wait
    at most `timeout` s for its answer."""
    return ask_all([owner_addr], op, timeout)[0]


def ask_all(addrs: list[str], op: tuple[Any, ...], timeout: float) -> list[Any]:
    """Send control operation `op` to every proc of `addrs` at once and wait, at most `timeout`
    s in all, for their answers (in order); the first error (by position) is raised."""
    rt = get_runtime()
    deadline = time.monotonic() + max(timeout, 0.0)
    asked = []
    for addr in addrs:
        entry = OncePort()
        port = rt.mailbox.open_port(entry, (addr,))
        rt.mailbox.post(addr, control(op, port))
        asked.append((addr, entry, port))
    answers = []
    for i, (addr, entry, _port) in enumerate(asked):
        try:
            raw = entry.cf.result(timeout=max(deadline - time.monotonic(), 0.0))
        except concurrent.futures.TimeoutError as exc:
            for _, _, left in asked[i:]:
                rt.mailbox.close_port(left)
            raise TimeoutError(
                f"The RDMA owner at {addr} did not answer {op_name(type(op))} in time."
            ) from exc
        answers.append(decode_reply(raw))
    return answers
