"""torchmonarch's `monarch_hyperactor.pickle`: pickling a message payload.

`pickle(obj)` pickles with this package's serializer (pickle 5 with cloudpickle for what plain
pickle cannot name; `monarch._src.transport.serialization`) into a `PicklingState`. Monarch also
collects tensor-engine and mesh references during pickling to resolve them later; here meshes and
tensors pickle by themselves, so a `PendingMessage` is always ready at once, and the counters of
Monarch's reference machinery do not exist (they raise).
"""

from __future__ import annotations

import pickle as _stdlib_pickle
from typing import Any

from monarch._rust_bindings.monarch_hyperactor.actor import PythonMessage, PythonMessageKind
from monarch._rust_bindings.monarch_hyperactor.buffers import FrozenBuffer
from monarch._rust_bindings.monarch_hyperactor.handle import Handle, _new_handle_pair
from monarch._src.transport.serialization import dumps, loads

__all__ = ["PendingMessage", "PicklingState", "pickle"]


class PicklingState:
    """A pickled object: its bytes (and the out-of-band buffers beside them)."""

    __slots__ = ("_buffers", "_frame")

    def __init__(self, frame: bytes, buffers: list[Any] | None = None) -> None:
        self._frame = frame
        self._buffers = list(buffers or [])

    def tensor_engine_references(self) -> list[Any]:
        """Tensor-engine objects met while pickling: none here (tensors pickle themselves)."""
        return []

    def buffer(self) -> FrozenBuffer:
        """The pickled bytes, out-of-band buffers folded in."""
        if not self._buffers:
            return FrozenBuffer(self._frame)
        obj = loads(self._frame, self._buffers)
        return FrozenBuffer(_stdlib_pickle.dumps(obj, protocol=5))

    def unpickle(self) -> Any:
        """The object back."""
        return loads(self._frame, self._buffers)


def pickle(
    obj: Any, allow_tensor_engine_references: bool = True, allow_mesh_references: bool = False
) -> PicklingState:
    """Pickle `obj` with monarch's serializer."""
    frame, buffers = dumps(obj)
    return PicklingState(frame, list(buffers))


class PendingMessage:
    """A message whose payload is pickled; ready at once here."""

    __slots__ = ("_kind", "_state")

    def __init__(self, kind: PythonMessageKind, state: PicklingState) -> None:
        self._kind = kind
        self._state = state

    @property
    def kind(self) -> PythonMessageKind:
        return self._kind

    def try_resolve_now(self) -> PythonMessage | None:
        return PythonMessage(self._kind, self._state.buffer(), [])

    def resolve(self) -> Handle[PythonMessage]:
        handle, completer = _new_handle_pair()
        completer.set_result(self.try_resolve_now())
        return handle


def _no_reference_counters(name: str) -> Any:
    raise NotImplementedError(
        f"{name}() counts Monarch's deferred mesh-reference pickling, which this package does "
        "not have (meshes pickle by value). There is nothing to count."
    )


def _get_mesh_pop_count() -> int:
    return int(_no_reference_counters("_get_mesh_pop_count"))


def _reset_mesh_pop_count() -> None:
    _no_reference_counters("_reset_mesh_pop_count")


def _get_pending_reserve_count() -> int:
    return int(_no_reference_counters("_get_pending_reserve_count"))


def _reset_pending_reserve_count() -> None:
    _no_reference_counters("_reset_pending_reserve_count")
