"""The three training steps `simulator_validation.py` predicts and measures.

Each model is written against plain torch (parameters are tensors with `requires_grad`,
layers are `torch.nn.functional` calls), so the same code runs on a real tensor-engine mesh
and on a `Simulator` mesh: autograd runs on the mesh, the gradients are averaged over the
mesh's data-parallel dimension with `reduce`, SGD updates the parameters in place, and the
loss is fetched (the step's sync point).

The shapes are powers of two on purpose: the calibration probe (`engine_profile`, the `"cpu"`
profile) uses odd shapes (200, 300, 360, ...) and only `mm`, `add`, `mul` and all-reduces, so
no operator of these models is timed by the calibration itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

LR = 0.01


@dataclasses.dataclass(frozen=True)
class Model:
    """A training step: `init(cfg)` makes the parameters on the active mesh, `loss(params,
    batch, cfg)` runs the forward pass on a fresh random batch and returns the scalar loss."""

    name: str
    describe: Callable[[dict[str, int], int], str]
    init: Callable[[dict[str, int]], list[Any]]
    loss: Callable[[list[Any], int, dict[str, int]], Any]


def _param(*shape: int, scale: float | None = None) -> Any:
    s = scale if scale is not None else 1.0 / math.sqrt(shape[-1])
    return (torch.randn(*shape) * s).requires_grad_()


# ---- MLP: linear-gelu-linear-gelu-linear, cross entropy ---------------------------------
def _mlp_init(c: dict[str, int]) -> list[Any]:
    return [_param(c["hidden"], c["d_in"]), _param(c["hidden"], scale=0.0),
            _param(c["hidden"], c["hidden"]), _param(c["hidden"], scale=0.0),
            _param(c["classes"], c["hidden"]), _param(c["classes"], scale=0.0)]


def _mlp_loss(p: list[Any], batch: int, c: dict[str, int]) -> Any:
    x = torch.randn(batch, c["d_in"])
    target = torch.randint(0, c["classes"], (batch,))
    h = F.gelu(F.linear(x, p[0], p[1]))
    h = F.gelu(F.linear(h, p[2], p[3]))
    return F.cross_entropy(F.linear(h, p[4], p[5]), target)


# ---- transformer block: pre-norm attention + MLP, mean-squared error ----------------------
def _tf_init(c: dict[str, int]) -> list[Any]:
    d = c["d_model"]
    return [_param(d, scale=0.0).detach().add(1.0).requires_grad_(), _param(d, scale=0.0),
            _param(3 * d, d), _param(d, d),
            _param(d, scale=0.0).detach().add(1.0).requires_grad_(), _param(d, scale=0.0),
            _param(4 * d, d), _param(4 * d, scale=0.0), _param(d, 4 * d), _param(d, scale=0.0)]


def _tf_loss(p: list[Any], batch: int, c: dict[str, int]) -> Any:
    d, heads, seq = c["d_model"], c["heads"], c["seq"]
    x = torch.randn(batch, seq, d)
    h = F.layer_norm(x, (d,), p[0], p[1])
    q, k, v = F.linear(h, p[2]).split(d, dim=-1)

    def split_heads(t: Any) -> Any:
        return t.reshape(batch, seq, heads, d // heads).transpose(1, 2)

    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // heads))
    att = torch.softmax(scores, dim=-1) @ v
    x = x + F.linear(att.transpose(1, 2).reshape(batch, seq, d), p[3])
    h = F.layer_norm(x, (d,), p[4], p[5])
    x = x + F.linear(F.gelu(F.linear(h, p[6], p[7])), p[8], p[9])
    return (x * x).mean()


# ---- conv net: conv-relu-pool, conv-relu-pool, linear, cross entropy ----------------------
def _conv_init(c: dict[str, int]) -> list[Any]:
    c1, c2, side = c["c1"], c["c2"], c["side"]
    return [_param(c1, 3, 3, 3, scale=1 / math.sqrt(27)), _param(c1, scale=0.0),
            _param(c2, c1, 3, 3, scale=1 / math.sqrt(9 * c1)), _param(c2, scale=0.0),
            _param(c["classes"], c2 * (side // 4) ** 2), _param(c["classes"], scale=0.0)]


def _conv_loss(p: list[Any], batch: int, c: dict[str, int]) -> Any:
    x = torch.randn(batch, 3, c["side"], c["side"])
    target = torch.randint(0, c["classes"], (batch,))
    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3], padding=1)), 2)
    return F.cross_entropy(F.linear(h.flatten(1), p[4], p[5]), target)


MODELS = {
    "mlp": Model(
        "mlp",
        lambda c, b: f"MLP {c['d_in']}->{c['hidden']}->{c['hidden']}->{c['classes']} "
                     f"(gelu, cross entropy), batch {b}",
        _mlp_init, _mlp_loss),
    "transformer": Model(
        "transformer",
        lambda c, b: f"pre-norm transformer block d={c['d_model']} heads={c['heads']} "
                     f"seq={c['seq']} (layernorm, attention, gelu MLP 4x), batch {b}",
        _tf_init, _tf_loss),
    "convnet": Model(
        "convnet",
        lambda c, b: f"conv net 3x{c['side']}x{c['side']} -> conv3x3 {c['c1']} -> pool -> "
                     f"conv3x3 {c['c2']} -> pool -> linear {c['classes']}, batch {b}",
        _conv_init, _conv_loss),
}

# Per model: the configuration and two batch sizes; "tiny" is for the test.
SIZES: dict[str, dict[str, tuple[dict[str, int], tuple[int, int]]]] = {
    "full": {
        "mlp": ({"d_in": 512, "hidden": 1024, "classes": 16}, (16, 128)),
        "transformer": ({"d_model": 128, "heads": 4, "seq": 64}, (2, 8)),
        "convnet": ({"side": 32, "c1": 16, "c2": 32, "classes": 16}, (8, 32)),
    },
    "tiny": {
        "mlp": ({"d_in": 16, "hidden": 32, "classes": 4}, (2, 4)),
        "transformer": ({"d_model": 16, "heads": 2, "seq": 8}, (1, 2)),
        "convnet": ({"side": 8, "c1": 4, "c2": 4, "classes": 4}, (1, 2)),
    },
}


def train_step(model: Model, params: list[Any], batch: int, cfg: dict[str, int], dim: str,
               fetch: Callable[[Any], Any]) -> Any:
    """Forward, backward, gradients averaged over `dim`, SGD in place; returns the fetched
    loss (the sync point of the step)."""
    loss = model.loss(params, batch, cfg)
    loss.backward()
    with torch.no_grad():
        for p in params:
            g = p.grad.reduce(dim, reduction="avg")
            p.sub_(g * LR)
            p.grad = None
    return fetch(loss.detach())
