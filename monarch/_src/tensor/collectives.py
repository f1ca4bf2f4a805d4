"""Controller side of collectives: `reduce`, `reduce_` and their pytree forms.

A reduction over mesh dimensions `dims` runs once per slice of the mesh that fixes every other
dimension: each such slice is one process group. The controller computes the groups and the
output's fake metadata; workers run the collective with gloo (CPU) or NCCL (CUDA).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from monarch._src.tensor.commands import OpMeta, Reduce
from monarch._src.tensor.dispatch import faking, tensor_meta
from monarch._src.tensor.mesh import DeviceMesh
from monarch._src.tensor.stream import get_active_stream
from monarch._src.tensor.tensor import Tensor, check_usable

__all__ = ["REDUCTIONS", "groups_along", "reduce", "reduce_", "reduce_tensor"]

REDUCTIONS = ("stack", "sum", "avg", "product", "min", "max", "band", "bor", "bxor")


def groups_along(mesh: DeviceMesh, dims: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """Engine ranks of every group that reduces over `dims` of `mesh` (row-major order)."""
    cache = mesh._engine.__dict__.setdefault("_group_cache", {})
    key = (tuple(mesh._shape.ranks()), tuple(mesh._shape.labels), dims)
    found = cache.get(key)
    if found is None:
        shape = mesh._shape
        others = [label for label in shape.labels if label not in dims]
        groups: dict[tuple[int, ...], list[int]] = {}
        for g in shape.ranks():
            coords = shape.coordinates(g)
            groups.setdefault(tuple(coords[o] for o in others), []).append(
                mesh._engine.rank_of[g]
            )
        found = cache[key] = tuple(tuple(v) for v in groups.values())
    result: tuple[tuple[int, ...], ...] = found
    return result


def _dims(mesh: DeviceMesh, dims: Any) -> tuple[str, ...]:
    names: tuple[str, ...] = (dims,) if isinstance(dims, str) else tuple(dims)
    labels = list(mesh._shape.labels)
    for d in names:
        if d not in labels:
            raise ValueError(f"reduce: dimension {d!r} is not a dimension of {mesh!r} ({labels}).")
    if not names:
        raise ValueError("reduce needs at least one mesh dimension to reduce over.")
    return names


def reduce_tensor(t: Tensor, dims: Any, reduction: str, scatter: bool, mesh: Any,
                  out: Tensor | None, inplace: bool) -> Tensor:
    """Issue one reduction of `t` (see `reduce`)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"reduce takes distributed monarch tensors, not {type(t).__name__}.")
    if mesh is not None:
        raise NotImplementedError("reduce(mesh=...) is not supported; use t.to_mesh(mesh) first.")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduce: unknown reduction {reduction!r}; use one of {REDUCTIONS}.")
    check_usable(t, write=inplace)
    m = t._mesh
    dims = _dims(m, dims)
    groups = groups_along(m, dims)
    n = len(groups[0])
    shape = list(t.shape)
    if reduction == "avg" and not t.dtype.is_floating_point and not t.dtype.is_complex:
        raise ValueError(f"reduce: 'avg' needs a floating tensor, not {t.dtype}.")
    if reduction in ("band", "bor", "bxor") and (t.dtype.is_floating_point or t.dtype.is_complex):
        raise ValueError(f"reduce: {reduction!r} needs an integer or bool tensor, not {t.dtype}.")
    if reduction == "stack":
        if scatter:
            if not shape or shape[0] != n:
                raise ValueError(
                    f"reduce(stack, scatter=True) needs dimension 0 of size {n} (the group size), "
                    f"not shape {tuple(shape)}."
                )
        else:
            shape = [n, *shape]
    elif scatter:
        if not shape or shape[0] % n:
            raise ValueError(
                f"reduce(scatter=True) needs dimension 0 divisible by the group size {n}, not "
                f"shape {tuple(shape)}."
            )
        shape[0] //= n
    if inplace and list(t.shape) != shape:
        raise ValueError(
            f"reduce_ cannot change the tensor's shape ({tuple(t.shape)} -> {tuple(shape)}); "
            "use reduce instead."
        )
    stream = get_active_stream()
    if inplace:
        result = t
    else:
        with faking():
            fake = torch.empty(shape, dtype=t.dtype, device=t.device)
        result = Tensor(fake, m, m._engine.new_id(), stream)
    meta = OpMeta(f"reduce.{reduction}{'.scatter' if scatter else ''}", (tensor_meta(t._fake),),
                  (tensor_meta(result._fake),))
    ranks = m.engine_ranks
    src, dst = t._id, result._id
    m._engine.submit(lambda seq: Reduce(seq, ranks, stream.name, src, dst, groups, reduction,
                                        scatter, inplace, meta))
    if out is not None:
        out.copy_(result)
        return out
    return result


def _map(tensors: Any, fn: Any) -> Any:
    return pytree.tree_map(lambda x: fn(x) if isinstance(x, Tensor) else x, tensors)


def reduce(tensors: Any, dims: Any, reduction: str = "sum", scatter: bool = False,
           mesh: Any = None, out: Any = None) -> Any:
    """Reduce every distributed tensor in the pytree `tensors` across mesh dimensions `dims`.

    `reduction`: stack (all-gather: a new leading dimension), sum, avg, product, min, max, band,
    bor, bxor. `scatter=True`: each rank keeps its share (reduce-scatter along dimension 0;
    all-to-all for stack).
    """
    if out is not None:
        return reduce_tensor(tensors, dims, reduction, scatter, mesh, out, inplace=False)
    return _map(tensors, lambda t: reduce_tensor(t, dims, reduction, scatter, mesh, None, False))


def reduce_(tensors: Any, dims: Any, reduction: str = "sum", scatter: bool = False,
            mesh: Any = None) -> Any:
    """In-place `reduce` of every distributed tensor in the pytree `tensors`."""
    return _map(tensors, lambda t: reduce_tensor(t, dims, reduction, scatter, mesh, None, True))
