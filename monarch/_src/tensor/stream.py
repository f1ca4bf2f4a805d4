"""Streams and borrows: which stream an operation runs on, and sharing tensors between them.

Every distributed tensor belongs to the stream that produced it; an operation on a stream may
only use tensors of that stream. `stream.borrow(t)` gives an alias of `t` usable on `stream`:
read-only borrows leave `t` readable on its own stream (and forbid writing either), mutable
borrows make `t` unusable on its stream until the borrow is dropped. Workers run every command
in issue order (on CUDA, on the current CUDA stream), so in this version streams enforce who
may use a tensor but do not overlap work; the stream name travels in every command for other
backends (a simulator) to model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monarch._src.tensor.tensor import Tensor

__all__ = ["Borrow", "Stream", "coalescing", "get_active_stream"]


class Stream:
    """A named stream of operations on every proc of the mesh."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Stream needs a non-empty name, not {name!r}.")
        self.name = name

    @contextlib.contextmanager
    def activate(self) -> Iterator[Stream]:
        """Operations inside the block run on this stream."""
        _active.append(self)
        try:
            yield self
        finally:
            _active.pop()

    def borrow(self, t: Tensor, mutable: bool = False) -> tuple[Tensor, Borrow]:
        """An alias of `t` usable on this stream, and the `Borrow` that ends the loan."""
        from monarch._src.tensor.tensor import Tensor, borrow_tensor

        if not isinstance(t, Tensor):
            raise TypeError(f"Stream.borrow takes a distributed monarch.Tensor, not {type(t)}.")
        if t._stream is self:
            raise ValueError(f"The tensor is already on stream {self.name!r}; no borrow needed.")
        alias = borrow_tensor(t, self, mutable)
        return alias, Borrow(t, alias, mutable)

    def __repr__(self) -> str:
        return f"<Stream({self.name!r}) at {id(self):#x}>"

    def __str__(self) -> str:
        return f"stream {self.name!r}"


class Borrow:
    """A loan of a tensor to another stream; `drop()` (or leaving `with`) ends it."""

    def __init__(self, origin: Tensor, alias: Tensor, mutable: bool) -> None:
        self._origin = origin
        self._alias = alias
        self._mutable = mutable
        self._dropped = False

    def drop(self) -> None:
        """End the loan: the alias becomes unusable and the original usable again."""
        if self._dropped:
            return
        self._dropped = True
        from monarch._src.tensor.tensor import drop_borrow

        drop_borrow(self._origin, self._alias, self._mutable)

    def __enter__(self) -> Borrow:  # typing.Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()


main_stream = Stream("main")
_active: list[Stream] = []


def get_active_stream() -> Stream:
    """The stream operations run on now ("main" unless inside `stream.activate()`)."""
    return _active[-1] if _active else main_stream


@contextlib.contextmanager
def coalescing() -> Iterator[None]:
    """Operations inside the block are sent to the workers as one batch when it ends."""
    from monarch._src.tensor.mesh import active_mesh_or_none

    mesh = active_mesh_or_none()
    if mesh is None:
        yield
        return
    engine = mesh._engine
    engine.hold()
    try:
        yield
    finally:
        engine.unhold()
