"""GPU paths: distributed CUDA tensors and NCCL collectives. Skipped without CUDA; run on a GPU
machine with `pytest tests/tensor -k cuda`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

import monarch

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (runs on GPU machines only)"
)


@pytest.fixture(scope="module")
def gpu_mesh() -> Iterator[Any]:
    """One proc per visible GPU (NCCL needs distinct devices per rank)."""
    from monarch.actor import this_host

    procs = this_host().spawn_procs(per_host={"gpus": torch.cuda.device_count()})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=60)


def test_cuda_ops_and_fetch(gpu_mesh: Any) -> None:
    with gpu_mesh.activate():
        x = torch.ones(4, device="cuda")
        y = (x * 3).sum()
        assert y.device.type == "cuda"
        got = monarch.inspect(y)
    assert got.device.type == "cpu" and float(got) == 12.0


def test_cuda_reduce_nccl(gpu_mesh: Any) -> None:
    n = torch.cuda.device_count()
    with gpu_mesh.activate():
        r = gpu_mesh.rank_tensor("gpus").to(torch.float32).cuda()
        s = (r + 1).reduce("gpus", "sum")
        st = (r + 1).reduce("gpus", "stack")
        got = monarch.inspect((s, st))
    assert float(got[0]) == n * (n + 1) / 2
    assert got[1].tolist() == [float(i + 1) for i in range(n)]


def test_cuda_visible_devices_per_proc(gpu_mesh: Any) -> None:
    env = monarch.remote("tests.tensor.remote_fns.env_vars")
    with gpu_mesh.activate():
        vm = env.call().get(timeout=60)
    assert [v["CUDA_VISIBLE_DEVICES"] for _, v in vm.items()] == [
        str(i) for i in range(torch.cuda.device_count())
    ]
