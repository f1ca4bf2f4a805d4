"""Moving distributed tensors between meshes: `to_mesh` and `slice_mesh`.

`t.slice_mesh(**dims)` names the same values on a slice of the mesh (no data moves).
`t.to_mesh(mesh)` copies values to another view of the same proc mesh: each target proc gets
the value of the source proc at the same coordinates of the dimensions both meshes share
(point-to-point over two-proc process groups); target dimensions the source lacks are
broadcast, with a warning. This is how pipeline stages pass activations.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch.utils._pytree as pytree

from monarch._src.mesh.proc_mesh import ProcMesh
from monarch._src.tensor.commands import Borrow, OpMeta, SendTensor
from monarch._src.tensor.dispatch import tensor_meta
from monarch._src.tensor.mesh import DeviceMesh, device_mesh_of
from monarch._src.tensor.stream import Stream, get_active_stream
from monarch._src.tensor.tensor import Tensor, check_usable

__all__ = ["as_device_mesh", "move_tensor", "slice_mesh", "slice_tensor", "to_mesh"]


def as_device_mesh(mesh: Any) -> DeviceMesh:
    """A `DeviceMesh` for a DeviceMesh or a ProcMesh."""
    if isinstance(mesh, DeviceMesh):
        return mesh
    if not isinstance(mesh, ProcMesh):
        raise TypeError(f"Expected a DeviceMesh or a ProcMesh, not {type(mesh).__name__}.")
    return device_mesh_of(mesh)


def slice_tensor(t: Tensor, dims: dict[str, Any]) -> Tensor:
    """The same values, on `t.mesh.slice(**dims)`."""
    check_usable(t, write=False)
    sub = t._mesh.slice(**dims)
    stream = get_active_stream()
    alias = Tensor(t._fake, sub, sub._engine.new_id(), stream)
    ranks = sub.engine_ranks
    src, out = t._id, alias._id
    sub._engine.submit(lambda seq: Borrow(seq, ranks, stream.name, src, out, False, False))
    return alias


def move_tensor(t: Tensor, mesh: Any, stream: Stream | None = None) -> Tensor:
    """Copy `t`'s values onto `mesh` (see the module docstring)."""
    check_usable(t, write=False)
    target = as_device_mesh(mesh)
    source = t._mesh
    if target._engine is not source._engine:
        raise NotImplementedError(
            "to_mesh between different proc meshes is not supported; both meshes must be views "
            "of the same proc mesh."
        )
    src_shape, dst_shape = source._shape, target._shape
    src_labels, dst_labels = list(src_shape.labels), list(dst_shape.labels)
    for label in src_labels:
        if label not in dst_labels and src_shape.extent[label] > 1:
            raise ValueError(
                f"to_mesh: the source dimension {label!r} is not in the target mesh; reduce over "
                "it or slice it away first."
            )
    for label in dst_labels:
        if label in src_labels and src_shape.extent[label] != dst_shape.extent[label]:
            raise ValueError(
                f"to_mesh: dimension {label!r} has size {src_shape.extent[label]} on the source "
                f"and {dst_shape.extent[label]} on the target; shared dimensions must match."
            )
    missing = [label for label in dst_labels if label not in src_labels]
    if missing:
        warnings.warn(
            f"to_mesh broadcasts the tensor along target dimensions {missing} that the source "
            "mesh does not have.", UserWarning, stacklevel=3,
        )
    engine = source._engine
    by_coords = {}
    for g in src_shape.ranks():
        c = src_shape.coordinates(g)
        by_coords[tuple(c[label] for label in dst_labels if label in src_labels)] = g
    pairs = []
    for g in dst_shape.ranks():
        c = dst_shape.coordinates(g)
        key = tuple(c[label] for label in dst_labels if label in src_labels)
        pairs.append((engine.rank_of[by_coords[key]], engine.rank_of[g]))
    stream = stream or get_active_stream()
    result = Tensor(t._fake, target, engine.new_id(), stream)
    ranks = tuple(sorted({r for p in pairs for r in p}))
    meta = OpMeta("to_mesh", (tensor_meta(t._fake),), (tensor_meta(result._fake),))
    src, out = t._id, result._id
    engine.submit(lambda seq: SendTensor(seq, ranks if len(ranks) < engine.size else None,
                                         stream.name, src, out, tuple(pairs), meta))
    return result


def to_mesh(tensors: Any, mesh: Any, stream: Stream | None = None) -> Any:
    """`t.to_mesh(mesh)` for every distributed tensor in the pytree `tensors`."""
    return pytree.tree_map(
        lambda x: move_tensor(x, mesh, stream) if isinstance(x, Tensor) else x, tensors
    )


def slice_mesh(tensors: Any, **dims: Any) -> Any:
    """`t.slice_mesh(**dims)` for every distributed tensor in the pytree `tensors`."""
    return pytree.tree_map(
        lambda x: slice_tensor(x, dims) if isinstance(x, Tensor) else x, tensors
    )
