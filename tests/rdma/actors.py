"""Actors shared by the RDMA integration and fault tests (imported by the procs too)."""

from __future__ import annotations

import os

import torch

from monarch.actor import Actor, endpoint
from monarch.rdma import RDMAAction, RDMABuffer


class Owner(Actor):
    """Owns a tensor of `n` bytes (value i % 251 at byte i) and hands out buffers over it."""

    def __init__(self, n: int) -> None:
        self.data = (torch.arange(n, dtype=torch.int64) % 251).to(torch.uint8)
        self.buffers: list[RDMABuffer] = []

    @endpoint
    def make(self) -> RDMABuffer:
        buf = RDMABuffer(self.data)
        self.buffers.append(buf)
        return buf

    @endpoint
    def make_bytearray(self, n: int) -> RDMABuffer:
        self.ba = bytearray(b"\x07" * n)
        buf = RDMABuffer(memoryview(self.ba))
        self.buffers.append(buf)
        return buf

    @endpoint
    def drop_all(self) -> None:
        for buf in self.buffers:
            buf.drop().get(timeout=30)

    @endpoint
    def head(self, k: int) -> list[int]:
        return self.data[:k].tolist()

    @endpoint
    def fill(self, value: int) -> None:
        self.data.fill_(value)

    @endpoint
    def reset(self) -> None:
        """Put the starting pattern back (in place: buffers keep pointing at it)."""
        self.data.copy_((torch.arange(self.data.numel(), dtype=torch.int64) % 251).to(torch.uint8))

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class Peer(Actor):
    """Reads and writes buffers it is given, from another proc."""

    @endpoint
    def force(self, plane: str | None) -> None:
        """Force the data plane of this proc's transfers (None: choose normally)."""
        if plane is None:
            os.environ.pop("MONARCH_RDMA_FORCE_PLANE", None)
        else:
            os.environ["MONARCH_RDMA_FORCE_PLANE"] = plane

    @endpoint
    def read(self, buf: RDMABuffer, extra: int = 0) -> tuple[list[int], str]:
        dst = torch.zeros(buf.size() + extra, dtype=torch.uint8)
        buf.read_into(dst).get(timeout=30)
        return dst.tolist(), buf._plane

    @endpoint
    def write(self, buf: RDMABuffer, values: list[int]) -> None:
        buf.write_from(torch.tensor(values, dtype=torch.uint8)).get(timeout=30)

    @endpoint
    def drop(self, buf: RDMABuffer) -> None:
        buf.drop().get(timeout=30)

    @endpoint
    def try_read(self, buf: RDMABuffer, timeout: float = 30) -> str:
        dst = torch.zeros(buf.size(), dtype=torch.uint8)
        try:
            buf.read_into(dst, timeout=timeout).get(timeout=timeout + 30)
        except Exception as exc:  # noqa: BLE001 - the test inspects what came back
            return f"{type(exc).__name__}: {exc}"
        return "ok"

    @endpoint
    def gather(self, bufs: list[RDMABuffer]) -> list[list[int]]:
        dsts = [torch.zeros(b.size(), dtype=torch.uint8) for b in bufs]
        action = RDMAAction()
        for d, b in zip(dsts, bufs):
            action.read_remote(d, b)
        action.submit().get(timeout=30)
        return [d.tolist() for d in dsts]

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class AsyncPeer(Actor):
    """Awaits transfers inside an async endpoint."""

    @endpoint
    async def read(self, buf: RDMABuffer) -> list[int]:
        dst = torch.zeros(buf.size(), dtype=torch.uint8)
        await buf.read_into(dst)
        return dst.tolist()


def expected(n: int) -> list[int]:
    """The bytes an `Owner(n)` starts with."""
    return [i % 251 for i in range(n)]


