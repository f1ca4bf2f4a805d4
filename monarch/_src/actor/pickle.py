"""torchmonarch's `monarch._src.actor.pickle`: `flatten`/`unflatten`, pickling with some objects
taken out.

`flatten(obj, filter)` pickles `obj`, but every object for which `filter` is true is left out of
the bytes and returned in a list, in the order met; `unflatten(data, values)` puts `values` back
in their places. Monarch uses it to carry mesh and tensor references beside a payload.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from monarch._rust_bindings.monarch_hyperactor.buffers import Buffer, FrozenBuffer

__all__ = ["flatten", "unflatten"]


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    def __init__(self, filter: Callable[[Any], bool], out: io.BytesIO) -> None:
        super().__init__(out, protocol=5)
        self._filter = filter
        self.saved: list[Any] = []  # the objects left out, by persistent id

    def persistent_id(self, obj: Any) -> int | None:
        if not self._filter(obj):
            return None
        self.saved.append(obj)
        return len(self.saved) - 1


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, values: Iterable[Any]) -> None:
        super().__init__(io.BytesIO(data))
        self._iter = iter(values)
        self._values: list[Any] = []

    def persistent_load(self, pid: Any) -> Any:
        while pid >= len(self._values):
            try:
                self._values.append(next(self._iter))
            except StopIteration:
                raise ValueError(
                    f"unflatten() was given {len(self._values)} values, but the data refers to "
                    f"value {pid}. Pass every value flatten() returned."
                ) from None
        return self._values[pid]


def flatten(obj: Any, filter: Callable[[Any], bool]) -> tuple[list[Any], Buffer]:
    """Pickle `obj` leaving out what `filter` selects: (the objects left out, the bytes)."""
    out = io.BytesIO()
    pickler = _Pickler(filter, out)
    pickler.dump(obj)
    buffer = Buffer()
    buffer.write(out.getbuffer())
    return pickler.saved, buffer


def unflatten(data: FrozenBuffer | bytes, values: Iterable[Any]) -> Any:
    """Rebuild what `flatten` pickled, putting `values` back in their places."""
    return _Unpickler(bytes(data), values).load()
