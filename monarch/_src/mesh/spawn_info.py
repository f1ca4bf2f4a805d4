"""What a spawn carries to each proc (`SpawnInfo`), and the shared `Extent`s of casts.

Records both sides use: the caller (`proc_mesh.ProcMesh.spawn`) builds them, the proc runtime
(`agent`, `hosted`) reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monarch._src.shape import Extent

if TYPE_CHECKING:
    from monarch._src.mesh.context import CreatorInfo

__all__ = ["SpawnInfo", "extent_of"]

_extents: dict[tuple[tuple[str, ...], tuple[int, ...]], Extent] = {}


def extent_of(labels: tuple[str, ...], sizes: tuple[int, ...]) -> Extent:
    """A shared `Extent` per (labels, sizes): casts repeat the same few."""
    key = (labels, sizes)
    ext = _extents.get(key)
    if ext is None:
        ext = _extents[key] = Extent(list(labels), list(sizes))
    return ext


class SpawnInfo:
    """What a proc needs to host one rank of an actor mesh."""

    __slots__ = ("actor_key", "creator", "labels", "name", "proc_mesh_ref", "rank", "sizes")

    def __init__(
        self,
        actor_key: str,
        name: str,
        rank: int,
        labels: tuple[str, ...],
        sizes: tuple[int, ...],
        creator: CreatorInfo,
        proc_mesh_ref: tuple[str, str],
    ) -> None:
        self.actor_key = actor_key  # the mesh's key in every proc's mailbox
        self.name = name  # spawn name
        self.rank = rank  # position of this actor in the mesh's extent (row-major)
        self.labels = labels
        self.sizes = sizes
        self.creator = creator
        self.proc_mesh_ref = proc_mesh_ref  # (owner address, proc mesh id), to fetch it lazily

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            SpawnInfo,
            (self.actor_key, self.name, self.rank, self.labels, self.sizes, self.creator,
             self.proc_mesh_ref),
        )
