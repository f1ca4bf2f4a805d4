"""Monarch's RDMA page: `RDMABuffer` over a tensor or bytes, read_into/write_from/drop, RDMAAction.

Follows the RDMA documentation and its examples: a buffer is created inside the actor that owns
the memory (``RDMABuffer(t.view(torch.uint8).flatten())`` or over ``memoryview(bytearray)``),
returned from an endpoint as a small handle, then read or written one-sided by the client or by
another actor; sizes and offsets (a larger destination or a smaller source touch the leading
bytes only), the errors for wrong sizes and bad memory, ``drop()``, ``RDMAAction`` batches, and
the backend queries (``get_rdma_backend``, ``is_ibverbs_available``, deprecated
``is_rdma_available``). On a machine without ibverbs both implementations use TCP.
"""

import warnings
from collections.abc import Callable
from typing import Any

import torch
from compat import check, differs, outcome, raises

from monarch.actor import Actor, endpoint, this_host
from monarch.rdma import (
    RDMAAction,
    RDMABuffer,
    get_rdma_backend,
    is_ibverbs_available,
    is_rdma_available,
)


class Owner(Actor):
    def __init__(self) -> None:
        self.tensor = torch.arange(8, dtype=torch.float32)
        self.raw = bytearray(b"monarch-rdma-bytes")
        self.warned: list = []

    @endpoint
    def tensor_buffer(self) -> RDMABuffer:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            buffer = RDMABuffer(self.tensor.view(torch.uint8).flatten())
        self.warned = [(w.category.__name__, str(w.message)) for w in seen]
        return buffer

    @endpoint
    def warnings_seen(self) -> list:
        return self.warned

    @endpoint
    def bytes_buffer(self) -> RDMABuffer:
        return RDMABuffer(memoryview(self.raw))

    @endpoint
    def slice_buffer(self) -> RDMABuffer:
        return RDMABuffer(self.tensor.view(torch.uint8)[8:16])

    @endpoint
    def values(self) -> list:
        return self.tensor.tolist()

    @endpoint
    def raw_bytes(self) -> bytes:
        return bytes(self.raw)

    @endpoint
    def set_values(self, values: list) -> None:
        self.tensor.copy_(torch.tensor(values, dtype=torch.float32))

    @endpoint
    def bad_buffer(self, kind: str) -> str:
        data = {
            "empty": lambda: torch.empty(0, dtype=torch.uint8),
            "strided": lambda: torch.arange(8, dtype=torch.uint8)[::2],
            "two-dimensional": lambda: torch.zeros(2, 2, dtype=torch.uint8),
        }[kind]()
        return outcome(RDMABuffer, data).split("\n")[0]


class Reader(Actor):
    @endpoint
    def read_sum(self, buffer: RDMABuffer) -> float:
        local = torch.zeros(buffer.size() // 4, dtype=torch.float32)
        buffer.read_into(local.view(torch.uint8).flatten()).get()
        return float(local.sum())

    @endpoint
    def write_ones(self, buffer: RDMABuffer) -> None:
        ones = torch.ones(buffer.size() // 4, dtype=torch.float32)
        buffer.write_from(ones.view(torch.uint8)).get()


def as_floats(t):
    return t.view(torch.float32).tolist()


check("backend", get_rdma_backend())
check("ibverbs available", is_ibverbs_available())
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    available = is_rdma_available()
check("is_rdma_available", available)
check("is_rdma_available warns", [(w.category.__name__, str(w.message)) for w in seen])

procs = this_host().spawn_procs(per_host={"gpus": 2})
owner = procs.slice(gpus=0).spawn("owner", Owner)
reader = procs.slice(gpus=1).spawn("reader", Reader)

buffer = owner.tensor_buffer.call_one().get()
check("creation warns about the TCP fallback", owner.warnings_seen.call_one().get())
check("buffer size", buffer.size())
check("buffer backend", buffer.backend)
check("buffer owner is a string", isinstance(buffer.owner, str))
check("buffer repr", repr(buffer))

dst = torch.zeros(32, dtype=torch.uint8)
check("read_into returns", buffer.read_into(dst).get())
check("read_into bytes", as_floats(dst))
bigger = torch.full((40,), 7, dtype=torch.uint8)
buffer.read_into(bigger).get()
check("read_into a larger destination", bigger[32:].tolist())
check("read_into a larger destination leading bytes", as_floats(bigger[:32]))
raises("read_into a smaller destination", buffer.read_into, torch.zeros(16, dtype=torch.uint8))

src = torch.tensor([10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0]).view(torch.uint8)
check("write_from returns", buffer.write_from(src).get())
check("write_from reaches the owner", owner.values.call_one().get())
buffer.write_from(torch.tensor([-1.0, -2.0]).view(torch.uint8)).get()
check("write_from a smaller source", owner.values.call_one().get())
raises("write_from a larger source", buffer.write_from, torch.zeros(40, dtype=torch.uint8))

check("another actor reads", reader.read_sum.call_one(buffer).get())
reader.write_ones.call_one(buffer).get()
check("another actor writes", owner.values.call_one().get())

view_buffer = owner.slice_buffer.call_one().get()
check("buffer over a slice size", view_buffer.size())
out = torch.zeros(8, dtype=torch.uint8)
view_buffer.read_into(out).get()
check("buffer over a slice bytes", as_floats(out))

raw = owner.bytes_buffer.call_one().get()
check("bytes buffer size", raw.size())
into = bytearray(raw.size())
raw.read_into(memoryview(into)).get()
check("bytes buffer read into a bytearray", bytes(into))
raw.write_from(memoryview(bytearray(b"MONARCH"))).get()
check("bytes buffer written from a bytearray", owner.raw_bytes.call_one().get())

owner.set_values.call_one([0, 1, 2, 3, 4, 5, 6, 7]).get()
first, second = torch.zeros(32, dtype=torch.uint8), torch.zeros(18, dtype=torch.uint8)
action = RDMAAction().read_remote(first, buffer).read_remote(second, raw)
check("action submit returns", action.submit().get())
check("action read the tensor", as_floats(first))
check("action read the bytes", bytes(second))
owner.set_values.call_one([9, 9, 9, 9, 9, 9, 9, 9]).get()
action.submit().get()
check("action resubmit reads fresh data", as_floats(first))
write = RDMAAction().write_remote(buffer, torch.tensor([5.0] * 8).view(torch.uint8))
write.submit().get()
check("action write", owner.values.call_one().get())
raises("action fetch_add", RDMAAction().fetch_add, buffer, first, 1)
raises("action compare_and_swap", RDMAAction().compare_and_swap, buffer, first, 0, 1)

check("empty buffer", owner.bad_buffer.call_one("empty").get())
raises("buffer over bytes", RDMABuffer, b"abc")
raises("buffer over a bytearray", RDMABuffer, bytearray(b"abc"))
raises("read_into a bytearray", buffer.read_into, bytearray(32))
raises("read_into a strided tensor", buffer.read_into, torch.zeros(64, dtype=torch.uint8)[::2])


def _into_read_only(transfer: Callable[[memoryview], Any], data: bytes) -> str:
    """What a transfer does to read-only memory (a bytes object behind a memoryview)."""
    try:
        transfer(memoryview(data)).get()
    except ValueError as exc:
        return "refused: read-only" if "read-only" in str(exc) else f"ValueError: {exc}"
    return f"wrote into the bytes object: {data!r}"


def write_read_only() -> str:
    # A bytes object made at run time, not a code constant: torchmonarch overwrites it.
    data = b"".join([b"cons", b"tant"])
    return _into_read_only(lambda view: RDMABuffer(view).write_from(
        torch.zeros(8, dtype=torch.uint8)), data)


def read_into_read_only() -> str:
    return _into_read_only(buffer.read_into, bytes(32))


reason = "torchmonarch writes into the immutable bytes object behind the memoryview"
differs("write_from into read-only memory", write_read_only, "refused: read-only",
        "wrote into the bytes object: " + repr(bytes(8)), reason)
differs("read_into read-only memory", read_into_read_only, "refused: read-only",
        "wrote into the bytes object: " + repr(bytes(torch.tensor([5.0] * 8).view(torch.uint8))),
        reason)
check("strided buffer", owner.bad_buffer.call_one("strided").get())
check("two-dimensional buffer", owner.bad_buffer.call_one("two-dimensional").get())
raises("negative timeout", buffer.read_into, dst, timeout=-1)

check("drop returns", buffer.drop().get())
# Monarch fails with a bare Exception naming its TCP backend's buffer table; ours with an
# RDMABufferDroppedError (an Exception) naming the buffer and its owner. Both fail the read.
check("read after drop fails", outcome(lambda: buffer.read_into(dst).get()).startswith(
    ("Exception: ", "RDMABufferDroppedError: ")))
procs.stop().get()
check("stopped", "yes")
