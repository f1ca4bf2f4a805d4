"""Getting values back to the controller: `fetch_shard`, `inspect`, `show`."""

from __future__ import annotations

from typing import Any

import torch.utils._pytree as pytree

from monarch._src.lowlevel import Future
from monarch._src.tensor.commands import Ref
from monarch._src.tensor.mesh import DeviceMesh, active_mesh_or_none
from monarch._src.tensor.tensor import Tensor

__all__ = ["engine_rank_at", "fetch_shard", "inspect", "show", "split_tree", "wait"]


def split_tree(obj: Any) -> tuple[Any, DeviceMesh | None]:
    """`obj` with `Ref`s in place of distributed tensors (and OpaqueRefs), and their mesh."""
    from monarch._src.tensor.opaque import OpaqueRef
    from monarch._src.tensor.stream import get_active_stream

    mesh: DeviceMesh | None = None
    stream = get_active_stream()

    def swap(x: Any) -> Any:
        nonlocal mesh
        if isinstance(x, Tensor) and x._stream is not stream:
            raise TypeError(
                f"A tensor of stream {x._stream.name!r} was used on the active stream "
                f"{stream.name!r}. This tensor is on a stream that is not the current active "
                "stream. Use with `stream.activate()` to switch streams, or move the tensor to "
                "the correct stream with `.borrow`."
            )
        if isinstance(x, (Tensor, OpaqueRef)):
            if mesh is None:
                mesh = x._mesh
            elif not mesh._same(x._mesh):
                raise ValueError(
                    f"Values on {x._mesh!r} and {mesh!r} were passed together; move them to "
                    "one mesh first with to_mesh()."
                )
            return Ref(x._id)
        return x

    return pytree.tree_map(swap, obj), mesh


def engine_rank_at(mesh: DeviceMesh, shard: dict[str, int] | None, coords: dict[str, int]) -> int:
    """The engine rank at the given coordinates of `mesh` (missing dimensions: 0)."""
    where = dict(shard or {})
    where.update(coords)
    labels = list(mesh._shape.labels)
    if where:  # as on torchmonarch: a shard map names every dimension (none: all zeros)
        for label in labels:
            if label not in where:
                raise ValueError(
                    f"Missing key '{label}' in shard map. Need all of {tuple(labels)}"
                )
    for label in where:
        if label not in labels:
            raise ValueError(f"Unknown dimension {label!r} for {mesh!r}; it has {labels}.")
    full = {label: where.get(label, 0) for label in labels}
    ranks = mesh.slice(**full)._shape.ranks() if full else mesh._shape.ranks()
    return mesh._engine.rank_of[ranks[0]]


def fetch_shard(obj: Any, shard: dict[str, int] | None = None, **coords: int) -> Future[Any]:
    """A future of `obj` (a pytree) with each distributed tensor replaced by its value at one
    point of its mesh (default: all coordinates 0), copied to the controller's CPU."""
    tree, mesh = split_tree(obj)
    if mesh is None:
        mesh = active_mesh_or_none()
        if mesh is None:
            return Future.from_value(obj)
    rank = engine_rank_at(mesh, shard, coords)
    return mesh._engine.call_worker(rank, "fetch", (tree,), lambda value: value)


def inspect(obj: Any, shard: dict[str, int] | None = None, **coords: int) -> Any:
    """`fetch_shard(obj, shard, **coords).result()`: the value at one point, now.

    Blocks the calling thread (also in a notebook cell, without the warning `Future.get()`
    gives inside a running event loop: waiting is the point of `inspect`).
    """
    return wait(fetch_shard(obj, shard, **coords))


def wait(fut: Future[Any], timeout: float | None = None) -> Any:
    """Block until `fut` is done and return its value (or raise), without loop warnings."""
    try:
        fut.wait(timeout, quiet=True)
    except TimeoutError:
        raise TimeoutError(f"The tensor engine did not answer within {timeout} seconds.") from None
    return fut.outcome()


def show(obj: Any, shard: dict[str, int] | None = None, **coords: int) -> Any:
    """Fetch a shard and render it with `torchshow` (installed separately)."""
    value = inspect(obj, shard, **coords)
    try:
        # optional, installed separately (and untyped where it is)
        import torchshow  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise ImportError(
            "monarch.show renders tensors with torchshow; install it (pip install torchshow) or "
            "use monarch.inspect(t) to get the values."
        ) from None
    return torchshow.show(value)
