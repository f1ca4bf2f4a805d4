"""The ibverbs data plane: memory registration, RC queue pairs set up over control messages,
and one-sided RDMA READ / WRITE through pyverbs.

Only used when `ibverbs.probe()` finds a device. The owner registers each buffer's host memory as
a memory region (`register`) and publishes its rkey and address in the handle (`RemoteKey`).
A requester keeps one reliable-connected queue pair per owner proc: it creates its end, sends its
(QP number, LID, GID, PSN) to the owner in an `rdma_ib_connect` control message, the owner
creates and connects the other end and answers with its own, and both move INIT -> RTR -> RTS.
A transfer registers the local memory, posts one signalled work request per chunk and polls the
completion queue until they finish or the deadline passes. A remote access error means the
owner deregistered the region (drop); a retry-exceeded error means the owner is unreachable.

Untested on real hardware in this repository's CI (no InfiniBand there): keep it small.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from monarch._src.config import get as config_get

__all__ = ["QpInfo", "RemoteKey", "VerbsDropped", "VerbsUnreachable", "register", "serve_connect",
           "verbs_move"]

_PORT = 1
_GID_INDEX = 0
_MAX_MSG = 1 << 30  # bytes per work request
_DEPTH = 64  # work requests in flight per queue pair


class VerbsDropped(Exception):
    """The owner's memory region is gone (remote access error): the buffer was dropped."""


class VerbsUnreachable(ConnectionError):
    """The owner's queue pair does not answer (transport retries exceeded)."""


@dataclass(frozen=True)
class RemoteKey:
    """What a requester needs to address a registered buffer with verbs."""

    rkey: int
    addr: int


@dataclass(frozen=True)
class QpInfo:
    """One end of a queue pair, as exchanged in `rdma_ib_connect`."""

    qpn: int
    lid: int
    gid: str
    psn: int
    mtu: int


class _Device:
    """This process's opened device, protection domain and port attributes."""

    def __init__(self) -> None:
        from pyverbs.device import Context  # type: ignore[import-not-found, unused-ignore]
        from pyverbs.pd import PD  # type: ignore[import-not-found, unused-ignore]

        from monarch._src.rdma.ibverbs import probe

        found = probe()
        if not found.available:
            raise RuntimeError(f"ibverbs is not usable: {found.reason}")
        self.ctx = Context(name=found.reason)
        self.pd = PD(self.ctx)
        port = self.ctx.query_port(_PORT)
        self.lid = int(port.lid)
        self.mtu = int(port.active_mtu)
        self.gid = str(self.ctx.query_gid(_PORT, _GID_INDEX).gid)

    def new_qp(self) -> tuple[Any, Any]:
        from pyverbs.cq import CQ  # type: ignore[import-not-found, unused-ignore]
        from pyverbs.enums import IBV_QPT_RC  # type: ignore[import-not-found, unused-ignore]
        from pyverbs.qp import QP, QPCap, QPInitAttr  # type: ignore[import-not-found, unused-ignore]

        cq = CQ(self.ctx, _DEPTH * 2)
        cap = QPCap(max_send_wr=_DEPTH, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        qp = QP(self.pd, QPInitAttr(qp_type=IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        return qp, cq

    def info(self, qp: Any, psn: int) -> QpInfo:
        return QpInfo(int(qp.qp_num), self.lid, self.gid, psn, self.mtu)


_lock = threading.Lock()
_device: _Device | None = None


def _dev() -> _Device:
    global _device
    with _lock:
        if _device is None:
            _device = _Device()
        return _device


def _access() -> int:
    from pyverbs import enums as e  # type: ignore[import-not-found, unused-ignore]

    return int(e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_WRITE)


def register(addr: int, length: int) -> Any:
    """Register `length` bytes at `addr` with the device; returns the pyverbs MR (close() it)."""
    from pyverbs.mr import MR  # type: ignore[import-not-found, unused-ignore]

    return MR(_dev().pd, length, _access(), address=addr)


def _connect(qp: Any, mine: QpInfo, peer: QpInfo) -> None:
    from pyverbs.addr import GID, AHAttr, GlobalRoute  # type: ignore[import-not-found, unused-ignore]
    from pyverbs.qp import QPAttr  # type: ignore[import-not-found, unused-ignore]

    attr = QPAttr()
    attr.qp_access_flags = _access()
    attr.port_num = _PORT
    attr.pkey_index = 0
    qp.to_init(attr)
    attr.path_mtu = min(mine.mtu, peer.mtu)
    attr.dest_qp_num = peer.qpn
    attr.rq_psn = peer.psn
    attr.max_dest_rd_atomic = 16
    attr.min_rnr_timer = 12
    route = GlobalRoute(dgid=GID(peer.gid), sgid_index=_GID_INDEX)
    attr.ah_attr = AHAttr(dlid=peer.lid, port_num=_PORT, is_global=1, gr=route)
    qp.to_rtr(attr)
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.sq_psn = mine.psn
    attr.max_rd_atomic = 16
    qp.to_rts(attr)


_served: list[tuple[Any, Any]] = []  # the owner's ends of queue pairs (kept open)


def serve_connect(peer: QpInfo) -> QpInfo:
    """Owner side of `rdma_ib_connect`: create and connect our end; answer with its info."""
    dev = _dev()
    qp, cq = dev.new_qp()
    mine = dev.info(qp, secrets.randbits(24))
    _connect(qp, mine, peer)
    with _lock:
        _served.append((qp, cq))
    return mine


class _Conn:
    """The requester's end of the queue pair to one owner proc (one transfer at a time)."""

    def __init__(self, owner_addr: str, timeout: float) -> None:
        from monarch._src.rdma.control import ask
        from monarch._src.rdma.control_ops import RdmaIbConnect

        dev = _dev()
        self.qp, self.cq = dev.new_qp()
        mine = dev.info(self.qp, secrets.randbits(24))
        peer = ask(owner_addr, RdmaIbConnect(mine), timeout)
        _connect(self.qp, mine, peer)
        self.lock = threading.Lock()


_conns: dict[str, _Conn] = {}  # owner proc address -> connected queue pair


def verbs_move(write: bool, owner_addr: str, key: RemoteKey, local: int, n: int,
               deadline: float) -> None:
    """RDMA WRITE (`write`) or READ `n` bytes between local address `local` and `key`."""
    from pyverbs import enums as e  # type: ignore[import-not-found, unused-ignore]
    from pyverbs.wr import SGE, SendWR  # type: ignore[import-not-found, unused-ignore]

    with _lock:
        conn = _conns.get(owner_addr)
    if conn is None:
        conn = _Conn(owner_addr, deadline - time.monotonic())
        with _lock:
            conn = _conns.setdefault(owner_addr, conn)
    mr = register(local, n)
    chunk = max(1, min(_MAX_MSG, int(config_get("rdma_max_chunk_size_mb")) << 20))
    opcode = e.IBV_WR_RDMA_WRITE if write else e.IBV_WR_RDMA_READ
    ok = False
    try:
        with conn.lock:
            offsets = list(range(0, n, chunk))
            for first in range(0, len(offsets), _DEPTH):
                batch = offsets[first:first + _DEPTH]
                for off in batch:
                    m = min(chunk, n - off)
                    wr = SendWR(wr_id=off, opcode=opcode, num_sge=1,
                                sg=[SGE(local + off, m, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
                    wr.set_wr_rdma(key.rkey, key.addr + off)
                    conn.qp.post_send(wr)
                _wait(conn.cq, len(batch), deadline, e)
        ok = True
    finally:
        mr.close()
        if not ok:
            with _lock:
                if _conns.get(owner_addr) is conn:
                    del _conns[owner_addr]  # a failed queue pair is in the error state


def _wait(cq: Any, count: int, deadline: float, e: Any) -> None:
    done = 0
    while done < count:
        npolled, wcs = cq.poll(count - done)
        for wc in wcs[:npolled]:
            if wc.status == e.IBV_WC_REM_ACCESS_ERR:
                raise VerbsDropped("remote access error: the memory region is gone")
            if wc.status == e.IBV_WC_RETRY_EXC_ERR:
                raise VerbsUnreachable("transport retries exceeded")
            if wc.status != e.IBV_WC_SUCCESS:
                raise RuntimeError(f"ibverbs work completion failed with status {wc.status}")
        done += npolled
        if done < count:
            if time.monotonic() > deadline:
                raise TimeoutError("the ibverbs transfer did not finish in time")
            time.sleep(0)  # yield the GIL to other transfers between polls
