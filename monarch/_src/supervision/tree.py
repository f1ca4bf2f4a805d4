"""The ownership tree: who owns which mesh, and the health of each rank, as a pure state machine.

Every mesh has exactly one owner, its spawner: an actor (by key) or the root client (`ROOT`).
Events go in, decisions come out; nothing here does I/O, so the rules are unit-tested alone:

* `rank_failed(mesh, rank, report)` returns the failure to deliver to the mesh's owner, once per
  rank: a repeated report of a rank already failed is dropped, and so is any report about a mesh
  that was stopped (stopped is not failed: procs that exit because they were told to are no one's
  fault).
* `stopping(mesh)` marks a mesh stopped (its owner stops it; each of its actors then stops the
  meshes it owns itself, in its own process's tree).
* `owner_failed(actor)` returns the meshes that actor owns and that still run, newest first: a
  mesh cannot outlive its owner.
* `status(mesh)` gives a mesh's stopped flag and failed ranks, to refuse calls before sending.
* `forget(mesh)` drops a stopped mesh whose actors or procs are gone; a report about it that
  still arrives (`rank_failed`) is dropped, as for any stopped mesh.

References and slices are not in the tree: only owners are, so only owners are told.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

__all__ = ["ROOT", "Delivery", "Health", "MeshRecord", "OwnershipTree"]

ROOT = "<root>"  # the owner key of meshes the root client spawned
# Forgotten meshes still recognised (`knows`), so a late report about one is dropped.
_FORGOTTEN_KEPT = 1024


class Health(enum.Enum):
    """The state of one rank, in display order. When several hold, the later wins: a stopped
    mesh is stopped even where ranks failed first (stopping is what the owner did)."""

    STARTING = "starting"  # its proc has not reported ready yet (the tree itself never says it)
    RUNNING = "running"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Delivery:
    """A failure to hand to `owner` (`__supervise__`, or the fault hook for `ROOT`)."""

    owner: str
    mesh_name: str
    rank: int
    report: str


@dataclass
class MeshRecord:
    key: str  # unique id of the mesh
    name: str  # user-facing name, as MeshFailure.mesh_name
    owner: str  # owner actor key, or ROOT
    size: int
    actors: bool  # an actor mesh (its ranks are actors), else a proc mesh
    stopped: bool = False
    failed: dict[int, str] = field(default_factory=dict)  # rank -> report


class OwnershipTree:
    """The meshes owned by the actors of one process (and by the root client). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._meshes: dict[str, MeshRecord] = {}  # mesh key -> record
        self._owned: dict[str, list[str]] = {}  # owner key -> mesh keys, in spawn order
        # The last meshes forgotten (oldest first, at most _FORGOTTEN_KEPT): a report about one
        # that arrives late is still known to be about a stopped mesh, and dropped.
        self._forgotten: dict[str, None] = {}

    def add(self, key: str, name: str, owner: str, size: int, actors: bool) -> None:
        """A mesh was spawned by `owner`."""
        with self._lock:
            if key in self._meshes:
                raise ValueError(f"mesh {name} ({key}) is already in the ownership tree")
            self._meshes[key] = MeshRecord(key, name, owner, size, actors)
            self._owned.setdefault(owner, []).append(key)

    def health(self, key: str, rank: int) -> Health:
        with self._lock:
            record = self._meshes[key]
            if record.stopped:
                return Health.STOPPED
            return Health.FAILED if rank in record.failed else Health.RUNNING

    def rank_failed(self, key: str, rank: int, report: str) -> Delivery | None:
        """Rank `rank` of mesh `key` failed; the delivery for its owner, or None if there is
        none to make (already reported, stopped, or a mesh this tree does not own)."""
        with self._lock:
            record = self._meshes.get(key)
            if record is None or record.stopped or rank in record.failed:
                return None
            if not 0 <= rank < record.size:
                raise ValueError(f"mesh {record.name} has no rank {rank} (size {record.size})")
            record.failed[rank] = report
            return Delivery(record.owner, record.name, rank, report)

    def stopping(self, key: str) -> bool:
        """Mark mesh `key` stopped; False if it already was (or is not known here)."""
        with self._lock:
            record = self._meshes.get(key)
            if record is None or record.stopped:
                return False
            record.stopped = True
            return True

    def owner_failed(self, owner: str) -> list[str]:
        """The actor `owner` failed: the meshes it owns that still run, newest first."""
        with self._lock:
            return [k for k in reversed(self._owned.get(owner, [])) if not self._meshes[k].stopped]

    def status(self, key: str) -> tuple[bool, dict[int, str]] | None:
        """(stopped, failed ranks -> report) of mesh `key`, or None if it is not known here.
        The dict is the live one: read it, do not keep it."""
        record = self._meshes.get(key)
        return None if record is None else (record.stopped, record.failed)

    def clean(self, key: str) -> bool:
        """Whether mesh `key` is known here, not stopped and with no failed rank: a call to it
        needs no closer look (`status`)."""
        record = self._meshes.get(key)
        return record is not None and not record.stopped and not record.failed

    def knows(self, key: str) -> bool:
        """Whether mesh `key` was spawned here (and not forgotten long ago)."""
        with self._lock:
            return key in self._meshes or key in self._forgotten

    def owner_of(self, key: str) -> str | None:
        with self._lock:
            record = self._meshes.get(key)
            return None if record is None else record.owner

    def forget(self, key: str) -> None:
        """Drop the record of mesh `key`, once nothing can report about it any more (its procs
        are gone): a tree that only grew would keep every mesh ever spawned."""
        with self._lock:
            record = self._meshes.pop(key, None)
            if record is None:
                return
            self._forgotten[key] = None
            if len(self._forgotten) > _FORGOTTEN_KEPT:
                del self._forgotten[next(iter(self._forgotten))]
            owned = self._owned.get(record.owner)
            if owned is not None:
                owned.remove(key)
                if not owned:
                    del self._owned[record.owner]

    def __len__(self) -> int:
        """The number of meshes recorded."""
        with self._lock:
            return len(self._meshes)
