"""A tiny data-parallel training loop on the mesh matches the same loop on one process."""

from __future__ import annotations

from typing import Any

import torch

import monarch


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(8, generator=g)
    return x, y


def _step(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    assert w.grad is not None
    return w.grad


def test_data_parallel_loop_matches_single_process(mesh2: Any) -> None:
    x_all, y_all = _data()
    lr, steps = 0.1, 5

    w_ref = torch.zeros(3, requires_grad=True)
    for _ in range(steps):
        grad = _step(w_ref, x_all, y_all)
        with torch.no_grad():
            w_ref -= lr * grad
        grad.zero_()

    with mesh2.activate():
        rows = mesh2.rank_tensor("gpus") * 4 + torch.arange(4)  # this proc's half
        x, y = x_all[rows], y_all[rows]
        w = torch.zeros(3, requires_grad=True)
        for _ in range(steps):
            grad = _step(w, x, y).reduce("gpus", "avg")
            with torch.no_grad():
                w -= lr * grad
            w.grad.zero_()
        shards = [monarch.inspect(w.detach(), gpus=g) for g in range(2)]
    assert torch.allclose(shards[0], w_ref.detach(), atol=1e-6)
    assert torch.equal(shards[0], shards[1])
