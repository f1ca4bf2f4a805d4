"""`monarch.Tensor`: the controller's handle on a tensor that lives, one shard per proc, on a mesh.

A `Tensor` is a torch wrapper subclass with no storage: its size, strides, dtype and device are
those of a fake tensor computed at the controller, so shapes are known without waiting for the
workers. It names its value on the workers by an integer id; when the handle is collected the
id is released and the workers forget the value with the next batch.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from monarch._src.tensor.mesh import DeviceMesh
    from monarch._src.tensor.stream import Stream

__all__ = ["Tensor", "borrow_tensor", "drop_borrow", "new_tensor"]

# `active` is True on a thread while it pickles a function for remote use; `sends` is the
# collector of an endpoint call's distributed tensors while its arguments are pickled
# (`actor_calls.encode_endpoint_args`).
_capturing = threading.local()


class Tensor(torch.Tensor):
    """A distributed tensor: one local value per proc of `mesh`, described by fake metadata."""

    _fake_obj: torch.Tensor | None  # the fake tensor with this tensor's metadata, made lazily
    _mesh: DeviceMesh  # where the values live
    _id: int  # the values' id on the workers
    _stream: Stream  # the stream that may use it
    _state: str  # "ok", "borrowed" (mutably: unusable), "dropped" (a dropped borrow)
    _readers: int  # read-only borrows outstanding (the tensor may not be written meanwhile)

    @staticmethod
    def __new__(  # torch's wrapper-subclass constructor
        cls, fake: torch.Tensor | None, mesh: DeviceMesh, ident: int, stream: Stream,
        meta: tuple[Any, ...] | None = None,
    ) -> Tensor:
        if fake is not None:
            t = torch.Tensor._make_wrapper_subclass(
                cls, fake.size(), strides=fake.stride(), storage_offset=fake.storage_offset(),
                dtype=fake.dtype, device=fake.device, layout=fake.layout, requires_grad=False,
            )
        else:  # from cached metadata: (shape, strides, storage offset, dtype, device)
            shape, strides, offset, dtype, device = meta  # type: ignore[misc]
            t = torch.Tensor._make_wrapper_subclass(
                cls, shape, strides=strides, storage_offset=offset, dtype=dtype, device=device,
                requires_grad=False,
            )
        t._fake_obj = fake
        t._mesh = mesh
        t._id = ident
        t._stream = stream
        t._state = "ok"
        t._readers = 0
        return t

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    # torch's stubs type these hooks as the plain builtins torch.Tensor assigns, not as the
    # classmethod protocol torch calls them by, so the torch idiom needs two ignores.
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        from monarch._src.tensor.dispatch import dispatch

        return dispatch(func, args, kwargs or {})

    @property
    def _fake(self) -> torch.Tensor:
        """A fake tensor with this tensor's metadata (for computing output shapes)."""
        fake = self._fake_obj
        if fake is None:
            from torch.utils._python_dispatch import _disable_current_modes

            from monarch._src.tensor.dispatch import fake_mode

            with _disable_current_modes(), fake_mode():
                fake = torch.empty_strided(
                    self.shape, self.stride(), dtype=self.dtype, device=self.device
                )
            if self.storage_offset():
                with _disable_current_modes(), fake_mode():
                    base = torch.empty(self.storage_offset() + fake.numel() * 2 + 1,
                                       dtype=self.dtype, device=self.device)
                    fake = base.as_strided(self.shape, self.stride(), self.storage_offset())
            self._fake_obj = fake
        return fake

    def __del__(self) -> None:
        try:
            self._mesh._engine.release(self._id)
        except Exception:  # noqa: BLE001, S110 - a finalizer must not raise (interpreter shutdown)
            pass

    @property
    def mesh(self) -> DeviceMesh:
        """The mesh this tensor's values live on."""
        return self._mesh

    @property
    def stream(self) -> Stream:
        """The stream that may use this tensor."""
        return self._stream

    def __repr__(self, **kwargs: Any) -> str:  # type: ignore[override]
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            fake = repr(self._fake)
        return f"monarch.Tensor(mesh={self._mesh!r}, stream={self._stream}, fake={fake})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Among the arguments of an endpoint call: each actor gets its own proc's value.
        engine = self._mesh._engine
        if engine.flushing_thread == threading.get_ident() or getattr(
            _capturing, "active", False
        ):
            raise TypeError(
                "A distributed tensor was captured inside a remote function or command (for "
                "example in a closure); pass it as an argument of the remote function instead."
            )
        sends = getattr(_capturing, "sends", None)
        if sends is None:
            raise TypeError(
                "A distributed monarch tensor can only be sent as an argument of an actor "
                "endpoint call (call, call_one, choose, stream, broadcast, rref); to send its "
                "value anywhere else, fetch it first with monarch.fetch_shard(t) or "
                "monarch.inspect(t)."
            )
        return sends.add(self)

    # ---- collectives and movement -------------------------------------------------------
    def reduce(self, dims: Any, reduction: str = "sum", scatter: bool = False,
               mesh: Any = None, out: Tensor | None = None) -> Tensor:
        """Reduce across `dims` of the mesh (see `monarch.reduce`)."""
        from monarch._src.tensor.collectives import reduce_tensor

        return reduce_tensor(self, dims, reduction, scatter, mesh, out, inplace=False)

    def reduce_(self, dims: Any, reduction: str = "sum", scatter: bool = False,
                mesh: Any = None) -> Tensor:
        """In-place `reduce`: this tensor holds the result."""
        from monarch._src.tensor.collectives import reduce_tensor

        return reduce_tensor(self, dims, reduction, scatter, mesh, None, inplace=True)

    def to_mesh(self, mesh: Any, stream: Stream | None = None) -> Tensor:
        """This tensor's values moved to `mesh` (see `monarch.to_mesh`)."""
        from monarch._src.tensor.movement import move_tensor

        return move_tensor(self, mesh, stream)

    def slice_mesh(self, **dims: Any) -> Tensor:
        """A view of this tensor restricted to a slice of its mesh (no data moves)."""
        from monarch._src.tensor.movement import slice_tensor

        return slice_tensor(self, dims)


def new_tensor(fake: torch.Tensor, mesh: DeviceMesh, stream: Stream) -> Tensor:
    """A handle with a fresh id for a value the next command will produce."""
    return Tensor(fake, mesh, mesh._engine.new_id(), stream)


def borrow_tensor(t: Tensor, stream: Stream, mutable: bool) -> Tensor:
    """Issue a borrow of `t` onto `stream`; returns the alias (see `Stream.borrow`)."""
    from monarch._src.tensor.commands import Borrow

    check_usable(t, write=mutable)
    alias = new_tensor(t._fake, t._mesh, stream)
    engine = t._mesh._engine
    ranks = t._mesh.engine_ranks
    engine.submit(lambda seq: Borrow(seq, ranks, stream.name, t._id, alias._id, mutable, False))
    if mutable:
        t._state = "borrowed"
    else:
        t._readers += 1
        alias._readers = 1  # a read-only alias may not be written either
    return alias


def drop_borrow(origin: Tensor, alias: Tensor, mutable: bool) -> None:
    """Issue the end of a borrow: the alias is forgotten, the origin usable again."""
    from monarch._src.tensor.commands import Borrow

    engine = origin._mesh._engine
    ranks = origin._mesh.engine_ranks
    engine.submit(lambda seq: Borrow(seq, ranks, alias._stream.name, origin._id, alias._id,
                                     mutable, True))
    alias._state = "dropped"
    if mutable:
        origin._state = "ok"
    else:
        origin._readers -= 1


def check_usable(t: Tensor, write: bool) -> None:
    """Raise if `t` may not be used now (wrong stream, lent out, dropped)."""
    from monarch._src.tensor.stream import get_active_stream

    if t._state == "dropped":
        raise ValueError("This tensor is a borrow that was dropped; it can no longer be used.")
    if t._state == "borrowed":
        raise ValueError(
            "This tensor is mutably borrowed by another stream; drop the borrow before using it."
        )
    if write and t._readers:
        raise ValueError(
            "This tensor is borrowed read-only by another stream (or is such a borrow); drop "
            "the borrow before writing to it."
        )
    active = get_active_stream()
    if t._stream is not active:
        raise ValueError(
            f"This tensor belongs to stream {t._stream.name!r} but is used on stream "
            f"{active.name!r}; use {active.name}.borrow(t) to use it there."
        )
