"""The per-proc RDMA manager: registered buffers by id, their valid words, drop, control ops.

Created lazily by the first `RDMABuffer` a process registers (`get_manager()`). It owns:

* the *valid-word page*: an anonymous mapping of 8-byte slots, one per live buffer. A slot holds
  the buffer's random token while it is registered and 0 once dropped. Same-host readers check
  it with process_vm_readv in the same system call as the data (and once more after a read), so
  a drop is seen without asking the owner; the cost is 8 bytes and, for reads, one extra system
  call per transfer. The page never moves, so slot addresses in handles stay valid.
* the TCP data-plane listener (`tcp.TcpServer`), which checks tokens against this registry.
* the control operations `rdma_drop` (a drop through a non-owner handle), `rdma_shm` (the
  same-host fallback copy), `rdma_cuda` (staging a CUDA buffer through its pinned mirror) and
  `rdma_ib_connect` (the verbs queue-pair exchange), installed in this process's mailbox.
* with a verbs device, one memory region per buffer (closed by `drop()`).

Dropped memory stays referenced for `DROP_GRACE_S` more seconds, so a one-sided write that
checked the valid word just before the drop lands in still-mapped memory rather than in memory
the allocator gave to something else.
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import logging
import mmap
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from monarch._src.lowlevel import Runtime, get_runtime
from monarch._src.rdma import vm
from monarch._src.rdma.errors import RDMABufferDroppedError
from monarch._src.rdma.ibverbs import probe
from monarch._src.rdma.memory import Region

__all__ = ["DROP_GRACE_S", "Entry", "Manager", "get_manager", "manager_if_started"]

logger = logging.getLogger(__name__)

SLOTS = 1 << 17  # live buffers per proc; the page is 1 MiB of virtual memory, touched lazily
DROP_GRACE_S = 5.0


@dataclass
class Entry:
    """One registered buffer in its owner."""

    region: Region  # the user's memory (kept alive while registered)
    token: int  # the capability; also the value of its valid word
    slot: int  # index of its valid word
    host_addr: int  # where peers read/write: region.addr, or the pinned mirror's for CUDA
    mirror: Any = None  # the pinned host tensor staging a CUDA buffer; None for CPU memory
    mr: Any = None  # the verbs memory region over host_addr; None without ibverbs


class Manager:
    """This process's registry of RDMA buffers. Thread-safe."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._lock = threading.Lock()
        self._page = mmap.mmap(-1, SLOTS * 8)
        self._slots = (ctypes.c_uint64 * SLOTS).from_buffer(self._page)
        self.slot_base = ctypes.addressof(self._slots)
        self._free = collections.deque(range(SLOTS))  # unused slot indices
        self._ids = itertools.count(1)
        self.entries: dict[int, Entry] = {}  # buffer id -> entry, while registered
        self._grave: collections.deque[tuple[float, Entry]] = collections.deque()
        vm.allow_any_tracer()
        from monarch._src.rdma.tcp import TcpServer

        self.tcp = TcpServer(self, _listen_host(rt.address))
        from monarch._src.rdma.control import install

        install(rt, self)

    # ---- registration ---------------------------------------------------------------------
    def register(self, region: Region, host_addr: int, mirror: Any) -> tuple[int, Entry]:
        """Register `region`; returns its buffer id and entry."""
        token = secrets.randbits(64) | 1
        mr = None
        if probe().available:
            from monarch._src.rdma.verbs import register

            try:
                mr = register(host_addr, region.nbytes)
            except Exception as exc:  # noqa: BLE001 - peers then use the TCP plane instead
                logger.warning("monarch: ibverbs could not register %d bytes: %s",
                               region.nbytes, exc)
        with self._lock:
            self._bury()
            if not self._free:
                raise RuntimeError(
                    f"This process has {SLOTS} RDMA buffers registered, the most it can hold. "
                    "Drop buffers you no longer need with buffer.drop()."
                )
            slot = self._free.popleft()
            bid = next(self._ids)
            entry = Entry(region, token, slot, host_addr, mirror, mr)
            self.entries[bid] = entry
            self._slots[slot] = token
        return bid, entry

    def drop(self, bid: int, token: int) -> bool:
        """Unregister buffer `bid` if `token` matches; False if it was not registered."""
        with self._lock:
            entry = self.entries.get(bid)
            if entry is None or entry.token != token:
                return False
            del self.entries[bid]
            self._slots[entry.slot] = 0
            self._free.append(entry.slot)
            self._grave.append((time.monotonic() + DROP_GRACE_S, entry))
            self._bury()
        if entry.mr is not None:
            entry.mr.close()  # peers' RDMA READ/WRITE now fail with a remote access error
        return True

    def _bury(self) -> None:
        now = time.monotonic()
        while self._grave and self._grave[0][0] <= now:
            self._grave.popleft()

    def slot_addr(self, slot: int) -> int:
        """Address of valid word `slot`."""
        return self.slot_base + 8 * slot

    # ---- lookups for the data planes ------------------------------------------------------
    def lookup(self, bid: int, token: int) -> Entry | None:
        """The entry of buffer `bid` if it is registered under `token`."""
        with self._lock:
            entry = self.entries.get(bid)
        if entry is None or entry.token != token:
            return None
        return entry

    def resolve(self, bid: int, token: int, offset: int, length: int, write: bool) -> int:
        """The address of bytes `offset`.. of buffer `bid` for a peer's request.

        Raises `RDMABufferDroppedError` if the buffer is not registered under `token`, and
        `ValueError` for a request outside the buffer or a write to read-only memory.
        """
        entry = self.lookup(bid, token)
        if entry is None:
            raise RDMABufferDroppedError(f"RDMA buffer {bid} is not registered: it was dropped.")
        if offset < 0 or length < 0 or offset + length > entry.region.nbytes:
            raise ValueError(f"The request for bytes {offset}..{offset + length} is outside RDMA "
                             f"buffer {bid} of {entry.region.nbytes} bytes.")
        if write and not entry.region.writable:
            raise ValueError(f"RDMA buffer {bid} is read-only.")
        return entry.host_addr + offset


def _listen_host(address: str) -> str:
    # The data plane listens on the interface the mailbox listens on (loopback for local procs).
    if "://" in address:
        hostport = address.split("://", 1)[1]
        host = hostport.rsplit(":", 1)[0].strip("[]")
        if host and not host.startswith("/") and "/" not in host:
            return host
    return "127.0.0.1"


_lock = threading.Lock()
_manager: Manager | None = None


def get_manager() -> Manager:
    """This process's manager, created (with its listener and control ops) on first use."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = Manager(get_runtime())
        return _manager


def manager_if_started() -> Manager | None:
    """The manager if this process registered a buffer, else None."""
    return _manager
