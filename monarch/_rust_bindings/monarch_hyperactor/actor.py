"""torchmonarch's `monarch_hyperactor.actor`: the message records of Monarch's Rust actor layer.

Monarch's Python actors receive `PythonMessage`s (a kind, pickled arguments, mesh references)
from Rust. Here messages are this package's own envelopes, so these are plain value records: code
that builds them (tests, custom ports) gets real objects with the same fields, and `Actor` and
`PortProtocol` are the protocols Monarch types its dispatch with.
"""

from __future__ import annotations

import pickle as _pickle
from collections.abc import Awaitable
from typing import Any, Generic, Protocol, TypeVar

from monarch._rust_bindings.monarch_hyperactor.buffers import FrozenBuffer

__all__ = [
    "Actor",
    "MethodSpecifier",
    "PortProtocol",
    "PythonMessage",
    "PythonMessageKind",
]

R = TypeVar("R", contravariant=True)


class _Record:
    """Equality and repr by fields, for the small kind/specifier records below."""

    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Record)
            and type(other) is type(self)
            and self._values() == other._values()
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__qualname__}({args})"


class MethodSpecifier(_Record):
    """Which endpoint a call names and how it answers (`ReturnsResponse`, `ExplicitPort`,
    `Init`)."""

    _fields = ("name",)

    def __init__(self, name: str) -> None:
        if type(self) is MethodSpecifier:
            raise TypeError(
                "MethodSpecifier is abstract; use MethodSpecifier.ReturnsResponse(name), "
                "MethodSpecifier.ExplicitPort(name) or MethodSpecifier.Init()."
            )
        self.name = name

    ReturnsResponse: type[MethodSpecifier]
    ExplicitPort: type[MethodSpecifier]
    Init: type[MethodSpecifier]


class _ReturnsResponse(MethodSpecifier):
    """An endpoint whose return value is the reply."""


class _ExplicitPort(MethodSpecifier):
    """An endpoint that answers through the port it is given."""


class _Init(MethodSpecifier):
    """The actor's `__init__`."""

    def __init__(self) -> None:
        super().__init__("__init__")


_ReturnsResponse.__qualname__ = "MethodSpecifier.ReturnsResponse"
_ExplicitPort.__qualname__ = "MethodSpecifier.ExplicitPort"
_Init.__qualname__ = "MethodSpecifier.Init"
MethodSpecifier.ReturnsResponse = _ReturnsResponse
MethodSpecifier.ExplicitPort = _ExplicitPort
MethodSpecifier.Init = _Init


class PythonMessageKind(_Record):
    """What a message is: a `Result` or `Exception` (from `rank`), a `CallMethod`, or
    `Uninit`."""

    def __init__(self) -> None:
        if type(self) is PythonMessageKind:
            raise TypeError(
                "PythonMessageKind is abstract; use PythonMessageKind.Result(rank), "
                ".Exception(rank), .CallMethod(name, response_port) or .Uninit()."
            )

    Result: type[PythonMessageKind]
    Exception: type[PythonMessageKind]
    CallMethod: type[PythonMessageKind]
    CallMethodIndirect: type[PythonMessageKind]
    Uninit: type[PythonMessageKind]


class _Result(PythonMessageKind):
    _fields = ("rank",)

    def __init__(self, rank: int | None) -> None:
        self.rank = rank


class _Exception(PythonMessageKind):
    _fields = ("rank",)

    def __init__(self, rank: int | None) -> None:
        self.rank = rank


class _CallMethod(PythonMessageKind):
    _fields = ("name", "response_port", "correlation_id")

    def __init__(
        self, name: MethodSpecifier, response_port: Any, correlation_id: int | None = None
    ) -> None:
        self.name = name
        self.response_port = response_port
        self.correlation_id = correlation_id


class _CallMethodIndirect(PythonMessageKind):
    _fields = ("name", "broker_id", "id", "unflatten_args", "correlation_id")

    def __init__(
        self,
        name: MethodSpecifier,
        broker_id: tuple[str, int],
        id: int,
        unflatten_args: list[Any],
        correlation_id: int | None = None,
    ) -> None:
        self.name = name
        self.broker_id = broker_id
        self.id = id
        self.unflatten_args = unflatten_args
        self.correlation_id = correlation_id


class _Uninit(PythonMessageKind):
    pass


for _cls, _name in (
    (_Result, "Result"),
    (_Exception, "Exception"),
    (_CallMethod, "CallMethod"),
    (_CallMethodIndirect, "CallMethodIndirect"),
    (_Uninit, "Uninit"),
):
    _cls.__qualname__ = f"PythonMessageKind.{_name}"
    setattr(PythonMessageKind, _name, _cls)


class PythonMessage:
    """A message: its kind and the pickled payload, read back only through `decode()` (as on
    Monarch, where `decode()` also reunites the mesh references carried beside the payload;
    here meshes travel inside it, so `refs` is always empty)."""

    __slots__ = ("_payload", "kind", "refs")

    def __init__(
        self, kind: PythonMessageKind, message: FrozenBuffer | bytes, refs: list[Any]
    ) -> None:
        if not isinstance(kind, PythonMessageKind):
            raise TypeError(
                f"PythonMessage kind must be a PythonMessageKind, not {type(kind).__name__}."
            )
        if list(refs):
            raise ValueError(
                "PythonMessage refs must be empty here: meshes are pickled inside the payload, "
                "not carried beside it. Pickle the object with "
                "monarch._rust_bindings.monarch_hyperactor.pickle.pickle(...) instead."
            )
        self.kind = kind
        self._payload = message if isinstance(message, FrozenBuffer) else FrozenBuffer(message)
        self.refs: list[Any] = []

    def decode(self) -> Any:
        """The object the payload holds."""
        return _pickle.loads(bytes(self._payload))

    def __repr__(self) -> str:
        return f"PythonMessage(kind={self.kind!r}, {len(bytes(self._payload))} bytes)"


class PortProtocol(Generic[R], Protocol):
    """What an endpoint's reply port offers: `send` a value, or `exception`."""

    def send(self, obj: R) -> None: ...

    def exception(self, obj: Any) -> None: ...


class Actor(Protocol):
    """The dispatch protocol of Monarch's Rust actor layer (here dispatch is `HostedActor`'s)."""

    def handle(
        self, ctx: Any, method: MethodSpecifier, message: FrozenBuffer, *args: Any
    ) -> Awaitable[None]: ...
