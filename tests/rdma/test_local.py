"""RDMA buffers owned by the client itself, moved through every same-host data plane.

The client is a proc too: a buffer it creates is reached through the same planes a peer would use
(process_vm_readv/writev on itself, the shm fallback's control round trip, the TCP listener), so
these tests exercise the real code paths without spawning procs.
"""

from __future__ import annotations

import asyncio
import pickle
import re
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
import torch

from monarch.config import configured
from monarch.rdma import RDMAAction, RDMABuffer, RDMATcpFallbackWarning

pytestmark = pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning")

PLANES = ["process_vm", "shm", "tcp"]


def _pattern(n: int, seed: int = 0) -> torch.Tensor:
    return ((torch.arange(n, dtype=torch.int64) * 7 + seed) % 256).to(torch.uint8)


def _remote(buf: RDMABuffer) -> RDMABuffer:
    """A copy of `buf` as a peer would receive it (only the handle travels)."""
    copy = pickle.loads(pickle.dumps(buf))
    assert copy._buffer.core.local is None
    return copy


@pytest.mark.parametrize("plane", PLANES)
def test_read_into_copies_whole_buffer(plane: str, force_plane: Any) -> None:
    force_plane(plane)
    src = _pattern(100_000)
    buf = RDMABuffer(src)
    dst = torch.zeros(100_000, dtype=torch.uint8)
    assert _remote(buf).read_into(dst).get(timeout=30) is None
    assert torch.equal(dst, src)
    assert _remote(buf)._plane == plane


@pytest.mark.parametrize("plane", PLANES)
def test_write_from_fills_leading_bytes_of_owner_memory(plane: str, force_plane: Any) -> None:
    force_plane(plane)
    owner_mem = torch.zeros(1000, dtype=torch.uint8)
    buf = _remote(RDMABuffer(owner_mem))
    buf.write_from(torch.full((10,), 9, dtype=torch.uint8)).get(timeout=30)
    assert owner_mem[:10].tolist() == [9] * 10 and int(owner_mem[10:].sum()) == 0


@pytest.mark.parametrize("plane", PLANES)
def test_large_transfer_round_trips(plane: str, force_plane: Any) -> None:
    # 24 MiB: above the TCP plane's parallel-stream threshold.
    force_plane(plane)
    src = _pattern(24 << 20, seed=3)
    buf = _remote(RDMABuffer(src))
    dst = torch.empty_like(src)
    buf.read_into(dst).get(timeout=30)
    assert torch.equal(dst, src)
    buf.write_from(_pattern(24 << 20, seed=5)).get(timeout=30)
    assert torch.equal(src, _pattern(24 << 20, seed=5))


@pytest.mark.parametrize("streams", [1, 3])
@pytest.mark.parametrize("op", ["read", "write"])
def test_tcp_transfer_uses_configured_parallel_connections(
    streams: int, op: str, force_plane: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The owner's side holds each request until `streams` are in at once: fewer connections at
    # the same time break the barrier (the request is refused, the transfer fails), more
    # requests show in the count.
    from monarch._src.rdma import tcp
    from monarch._src.rdma.manager import get_manager

    force_plane("tcp")
    src = _pattern(tcp.PARALLEL_MIN, seed=7)
    buf = _remote(RDMABuffer(src))
    manager = get_manager()
    resolve = manager.resolve
    together = threading.Barrier(streams, timeout=10)
    served: list[int] = []

    def resolve_together(bid: int, token: int, offset: int, length: int, write: bool) -> int:
        served.append(length)
        try:
            together.wait()
        except threading.BrokenBarrierError:
            raise ValueError(f"fewer than {streams} connections were open at once") from None
        return resolve(bid, token, offset, length, write)

    monkeypatch.setattr(manager, "resolve", resolve_together)
    with configured(rdma_tcp_fallback_parallelism=streams):
        if op == "read":
            dst = torch.empty_like(src)
            buf.read_into(dst).get(timeout=30)
            assert torch.equal(dst, src)
        else:
            buf.write_from(_pattern(tcp.PARALLEL_MIN, seed=8)).get(timeout=30)
            assert torch.equal(src, _pattern(tcp.PARALLEL_MIN, seed=8))
    assert len(served) == streams and sum(served) == tcp.PARALLEL_MIN


def test_read_into_larger_destination_writes_leading_bytes_only() -> None:
    buf = RDMABuffer(memoryview(bytearray(b"abcd")))
    dst = bytearray(b"........")
    buf.read_into(memoryview(dst)).get(timeout=30)
    assert dst == bytearray(b"abcd....")


def test_read_into_smaller_destination_raises_value_error_synchronously() -> None:
    buf = RDMABuffer(memoryview(bytearray(16)))
    match = re.escape("destination local memory size (15) must be >= remote buffer size (16)")
    with pytest.raises(ValueError, match=f"^{match}$"):
        buf.read_into(memoryview(bytearray(15)))


def test_write_from_larger_source_raises_value_error_synchronously() -> None:
    buf = RDMABuffer(memoryview(bytearray(16)))
    match = re.escape("source local memory size (17) must be <= remote buffer size (16)")
    with pytest.raises(ValueError, match=f"^{match}$"):
        buf.write_from(memoryview(bytearray(17)))


def test_write_into_read_only_buffer_rejected() -> None:
    buf = RDMABuffer(memoryview(b"constant"))
    with pytest.raises(ValueError, match="read-only"):
        buf.write_from(memoryview(b"x"))
    dst = bytearray(8)
    buf.read_into(memoryview(dst)).get(timeout=30)
    assert dst == b"constant"


def test_buffer_rejects_bad_data_synchronously() -> None:
    with pytest.raises(ValueError):
        RDMABuffer(torch.zeros(0))
    with pytest.raises(ValueError):
        RDMABuffer(torch.zeros(10)[::2])
    with pytest.raises(ValueError):
        RDMABuffer(memoryview(bytearray(0)))


def test_buffer_without_backend_raises_runtime_error_naming_the_fix() -> None:
    with (
        configured(rdma_disable_ibverbs=True, rdma_allow_tcp_fallback=False),
        pytest.raises(RuntimeError, match="rdma_allow_tcp_fallback=True"),
    ):
        RDMABuffer(memoryview(bytearray(4)))


def test_bad_timeout_rejected() -> None:
    buf = RDMABuffer(memoryview(bytearray(4)))
    with pytest.raises(ValueError, match="timeout"):
        buf.read_into(memoryview(bytearray(4)), timeout=0)


def test_owner_and_size_and_repr() -> None:
    buf = RDMABuffer(torch.zeros(8, dtype=torch.float64))
    assert buf.size() == 64
    assert buf.owner == "<root>"
    assert repr(buf) == f"<monarch._src.rdma.rdma.RDMABuffer object at {id(buf):#x}>"
    assert buf.backend == "tcp"  # Monarch's backend name; the plane is buf._plane


def test_buffer_keeps_memory_alive_after_caller_forgets_it() -> None:
    buf = RDMABuffer(_pattern(4096))  # the only reference to the tensor is the buffer's
    dst = torch.empty(4096, dtype=torch.uint8)
    _remote(buf).read_into(dst).get(timeout=30)
    assert torch.equal(dst, _pattern(4096))


@pytest.mark.parametrize("plane", PLANES)
def test_drop_makes_later_transfers_through_any_handle_fail(plane: str, force_plane: Any) -> None:
    force_plane(plane)
    buf = RDMABuffer(memoryview(bytearray(64)))
    other = _remote(buf)
    buf.drop().get(timeout=30)
    for handle in (buf, other):
        with pytest.raises(RuntimeError, match=r"RDMABuffer \d+ \(64 bytes\) .* was dropped"):
            handle.read_into(memoryview(bytearray(64))).get(timeout=30)
        with pytest.raises(RuntimeError, match="was dropped"):
            handle.write_from(memoryview(bytearray(1))).get(timeout=30)
    assert buf.drop().get(timeout=30) is None  # dropping again is harmless


def test_drop_through_received_handle_unregisters_at_owner() -> None:
    buf = RDMABuffer(memoryview(bytearray(64)))
    _remote(buf).drop().get(timeout=30)
    with pytest.raises(RuntimeError, match="was dropped"):
        buf.read_into(memoryview(bytearray(64))).get(timeout=30)


def test_rdma_action_resubmit_picks_up_fresh_data_into_disjoint_slices() -> None:
    a_mem, b_mem = torch.zeros(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
    a, b = _remote(RDMABuffer(a_mem)), _remote(RDMABuffer(b_mem))
    local = torch.zeros(8, dtype=torch.uint8)
    action = RDMAAction().read_remote(local[:4], a).read_remote(local[4:], b)
    for value in (1, 2):
        a_mem.fill_(value)
        b_mem.fill_(value * 10)
        action.submit().get(timeout=30)
        assert local.tolist() == [value] * 4 + [value * 10] * 4


def test_rdma_action_mixes_reads_and_writes() -> None:
    remote_mem = torch.zeros(4, dtype=torch.uint8)
    src_mem = torch.arange(4, dtype=torch.uint8)
    out = torch.zeros(4, dtype=torch.uint8)
    target, source = _remote(RDMABuffer(remote_mem)), _remote(RDMABuffer(src_mem))
    RDMAAction().write_remote(target, torch.full((4,), 5, dtype=torch.uint8)).read_remote(
        out, source).submit().get(timeout=30)
    assert remote_mem.tolist() == [5] * 4 and out.tolist() == [0, 1, 2, 3]


def test_rdma_action_fails_when_any_op_fails() -> None:
    good, gone = RDMABuffer(memoryview(bytearray(4))), RDMABuffer(memoryview(bytearray(4)))
    action = RDMAAction().read_remote(memoryview(bytearray(4)), good)
    action.read_remote(memoryview(bytearray(4)), _remote(gone))
    gone.drop().get(timeout=30)
    with pytest.raises(RuntimeError, match="was dropped"):
        action.submit().get(timeout=30)


def test_rdma_action_size_errors_are_synchronous() -> None:
    buf = RDMABuffer(memoryview(bytearray(8)))
    with pytest.raises(ValueError):
        RDMAAction().read_remote(memoryview(bytearray(4)), buf)
    with pytest.raises(ValueError):
        RDMAAction().write_remote(buf, memoryview(bytearray(9)))


async def test_transfers_can_be_awaited_concurrently() -> None:
    bufs = [_remote(RDMABuffer(_pattern(1024, seed=i))) for i in range(8)]
    dsts = [torch.empty(1024, dtype=torch.uint8) for _ in bufs]
    await asyncio.gather(*(b.read_into(d) for b, d in zip(bufs, dsts)))
    assert all(torch.equal(d, _pattern(1024, seed=i)) for i, d in enumerate(dsts))


def test_bad_forced_plane_named_in_error(force_plane: Any) -> None:
    force_plane("carrier-pigeon")
    buf = RDMABuffer(memoryview(bytearray(4)))
    assert _remote(buf)._plane == "none"
    with pytest.raises(ValueError, match="MONARCH_RDMA_FORCE_PLANE"):
        buf.read_into(memoryview(bytearray(4))).get(timeout=30)


@pytest.mark.slow
def test_import_rdma_fresh_interpreter_emits_no_warning() -> None:
    # A fresh interpreter, warnings as errors: here monarch.rdma is imported already, and
    # importing it again would run none of its import-time code.
    res = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import monarch.rdma, monarch._src.rdma.rdma"],
        capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


@pytest.mark.slow
def test_tcp_fallback_warning_emitted_once_and_torch_not_imported() -> None:
    # A fresh interpreter: the warning is once per process, and torch must stay unloaded.
    code = textwrap.dedent(
        """
        import sys, warnings
        warnings.simplefilter("always")
        import monarch.rdma as rdma
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            a = rdma.RDMABuffer(memoryview(bytearray(b"abc")))
            b = rdma.RDMABuffer(memoryview(bytearray(b"def")))
        kinds = [w.category.__name__ for w in seen]
        out = bytearray(3)
        b.read_into(memoryview(out)).get(timeout=30)
        print(rdma.get_rdma_backend(), kinds.count("RDMATcpFallbackWarning"), bytes(out),
              "torch" in sys.modules)
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    backend, count, data, torch_loaded = res.stdout.split()
    if backend == "tcp":
        assert count == "1"
    assert data == "b'def'" and torch_loaded == "False"
    assert RDMATcpFallbackWarning.__name__ == "RDMATcpFallbackWarning"
