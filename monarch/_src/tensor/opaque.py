"""`OpaqueRef`: a handle to a Python object that lives on every proc of a mesh."""

from __future__ import annotations

from typing import Any

from monarch._src.tensor.commands import CallRemote, OpMeta
from monarch._src.tensor.mesh import get_active_mesh
from monarch._src.tensor.stream import get_active_stream

__all__ = ["OpaqueRef"]


def _identity(value: Any) -> Any:
    return value


class OpaqueRef:
    """A worker-local object: `OpaqueRef(value)` under `activate()` gives every proc of the
    active mesh its own copy; passed to remote functions, each proc's function receives its own
    object (which it may mutate); `fetch_shard` returns one proc's object."""

    def __init__(self, value: Any = None) -> None:
        mesh = get_active_mesh()
        self._mesh = mesh
        self._id = mesh._engine.new_id()
        stream = get_active_stream()
        ranks = mesh.engine_ranks
        ident = self._id
        mesh._engine.submit(lambda seq: CallRemote(
            seq, ranks, stream.name, f"{__name__}._identity", (value,), {}, (), (ident,),
            OpMeta("OpaqueRef", (), ()),
        ))

    def __del__(self) -> None:
        try:
            self._mesh._engine.release(self._id)
        except Exception:  # noqa: BLE001, S110 - a finalizer must not raise (interpreter shutdown)
            pass

    def __repr__(self) -> str:
        return f"<OpaqueRef {self._id} on {self._mesh!r}>"
