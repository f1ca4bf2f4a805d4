"""torchmonarch's `monarch_hyperactor.value_mesh`: `ValueMesh` (`monarch.actor`'s)."""

from __future__ import annotations

from typing import Any

from monarch._src.mesh.value_mesh import ValueMesh
from monarch._src.shape import Shape, Slice

__all__ = ["ValueMesh"]


def _make_test_value_mesh(labels: list[str], sizes: list[int], values: list[Any]) -> ValueMesh[Any]:
    """A dense row-major `ValueMesh` over `labels`/`sizes` holding `values` in rank order."""
    n = 1
    for s in sizes:
        n *= s
    if len(values) != n:
        raise ValueError(f"A mesh of sizes {sizes} holds {n} values, but {len(values)} were given.")
    return ValueMesh(Shape(list(labels), Slice.new_row_major(list(sizes))), list(values))
