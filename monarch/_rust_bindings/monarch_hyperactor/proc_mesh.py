"""torchmonarch's `monarch_hyperactor.proc_mesh`: `ProcMesh`, Monarch's Rust-side proc mesh.

On Monarch `monarch.actor.ProcMesh` wraps this Rust object (its `_proc_mesh`). Here the Python
`ProcMesh` is the whole implementation and there is no inner object; the name exists for code
that imports or annotates with it, and constructing one says where proc meshes come from.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProcMesh"]


class ProcMesh:
    """Monarch's Rust proc mesh; has no counterpart here (see the module note)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "The Rust-side ProcMesh does not exist here: monarch.actor.ProcMesh is the whole "
            "proc mesh. Get one from this_host().spawn_procs(per_host={...})."
        )
