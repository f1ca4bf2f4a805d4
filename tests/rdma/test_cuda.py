"""CUDA tensors in RDMA transfers, staged through pinned host memory (`pytest tests/rdma -k cuda`).

Skipped, with the reason, where `torch.cuda.is_available()` is False. Covers a CUDA buffer read
into and written from CPU memory, a CPU buffer read into a CUDA destination, and both ends CUDA,
on every same-host plane, and a CUDA buffer owned by an actor in another proc.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from monarch.actor import Actor, endpoint
from monarch.rdma import RDMABuffer

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda.is_available() is False"),
    pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning"),
    pytest.mark.filterwarnings("ignore::monarch.rdma.RDMAReadTransferWarning"),
    pytest.mark.filterwarnings("ignore::monarch.rdma.RDMAWriteTransferWarning"),
    pytest.mark.filterwarnings("ignore:RDMABuffer over CUDA memory:UserWarning"),
]

T = 60.0
PLANES = ["process_vm", "shm", "tcp"]


def _remote(buf: RDMABuffer) -> RDMABuffer:
    return pickle.loads(pickle.dumps(buf))


def _pattern(n: int) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int64) % 253).to(torch.uint8)


@pytest.mark.parametrize("plane", PLANES)
def test_cuda_buffer_read_into_cpu_and_written_from_cpu(plane: str, force_plane: Any) -> None:
    force_plane(plane)
    gpu = _pattern(1 << 20).cuda()
    buf = _remote(RDMABuffer(gpu))
    dst = torch.empty(1 << 20, dtype=torch.uint8)
    buf.read_into(dst).get(timeout=T)
    assert torch.equal(dst, _pattern(1 << 20))
    buf.write_from(torch.full((100,), 7, dtype=torch.uint8)).get(timeout=T)
    assert gpu[:100].cpu().tolist() == [7] * 100 and gpu[100].item() == 100


@pytest.mark.parametrize("plane", PLANES)
def test_cpu_buffer_read_into_cuda_destination(plane: str, force_plane: Any) -> None:
    force_plane(plane)
    buf = _remote(RDMABuffer(_pattern(4096)))
    dst = torch.zeros(4096 + 10, dtype=torch.uint8, device="cuda")
    buf.read_into(dst).get(timeout=T)
    assert torch.equal(dst[:4096].cpu(), _pattern(4096)) and int(dst[4096:].sum()) == 0


def test_cuda_to_cuda_float_tensors_round_trip() -> None:
    src = torch.randn(1000, device="cuda")
    dst = torch.zeros(1000, device="cuda")
    _remote(RDMABuffer(src)).read_into(dst).get(timeout=T)
    assert torch.equal(src, dst)
    back = torch.ones(1000, device="cuda")
    _remote(RDMABuffer(dst)).write_from(back).get(timeout=T)
    assert torch.equal(dst, back)


class GpuOwner(Actor):
    """Holds a CUDA tensor in its own proc."""

    def __init__(self) -> None:
        self.t = torch.arange(1024, dtype=torch.float32, device="cuda")

    @endpoint
    def make(self) -> RDMABuffer:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.buf = RDMABuffer(self.t)
        return self.buf

    @endpoint
    def total(self) -> float:
        return float(self.t.sum())


@pytest.fixture
def gpu_owner(procs2: Any) -> Iterator[Any]:
    owner = procs2.slice(gpus=0).spawn("rdma_gpu_owner", GpuOwner)
    yield owner
    owner.stop().get(timeout=T)


def test_cuda_buffer_owned_by_actor_in_another_proc(gpu_owner: Any) -> None:
    buf = gpu_owner.make.call_one().get(timeout=T)
    dst = torch.empty(1024, dtype=torch.float32)
    buf.read_into(dst).get(timeout=T)
    assert float(dst.sum()) == float(sum(range(1024)))
    buf.write_from(torch.zeros(1024, dtype=torch.float32)).get(timeout=T)
    assert gpu_owner.total.call_one().get(timeout=T) == 0.0
