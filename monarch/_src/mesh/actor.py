"""Defining actors: the `Actor` base class and the `endpoint` decorators.

An endpoint is an `EndpointProperty` descriptor on the class. On the class it is the descriptor
itself; on an actor instance it is the plain bound method, so an actor can call its own methods
directly. On an `ActorMesh` the same name yields an `Endpoint` with the adverbs (see
`endpoint.py`). Classes are validated when spawned, not when defined, as in Monarch.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = [
    "Actor",
    "EndpointProperty",
    "concurrent_endpoint",
    "endpoint",
    "endpoints_of",
    "validate_actor_class",
]

F = TypeVar("F", bound=Callable[..., Any])


class EndpointProperty:
    """An endpoint declared on an actor class."""

    def __init__(
        self,
        method: Callable[..., Any],
        propagate: Any = None,
        explicit_response_port: bool = False,
        instrument: bool = True,
        concurrent: bool = False,
    ) -> None:
        self._method = method
        self._propagator = propagate
        # The method takes the response port as its first argument.
        self._takes_port = explicit_response_port
        # What Monarch reports: its concurrent endpoints answer through a port they are handed
        # (the reply is sent when the task ends), so they count as explicit-port endpoints.
        self._explicit_response_port = explicit_response_port or concurrent
        self._instrument = instrument
        self._concurrent = concurrent  # started as a task; the actor moves on at once
        self._is_async = inspect.iscoroutinefunction(method)
        functools.update_wrapper(self, method)

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> EndpointProperty: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> Callable[..., Any]: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return self._method.__get__(obj, objtype)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._method(*args, **kwargs)

    def __repr__(self) -> str:
        # Monarch's default object repr, under its module path.
        return f"<monarch._src.actor.endpoint.EndpointProperty object at {id(self):#x}>"


def endpoint(
    method: Callable[..., Any] | None = None,
    *,
    propagate: Any = None,
    explicit_response_port: bool = False,
    instrument: bool = True,
) -> Any:
    """Mark an actor method as an endpoint; usable bare or with options."""

    def wrap(m: Callable[..., Any]) -> EndpointProperty:
        if isinstance(m, EndpointProperty):
            return m
        if not callable(m):
            raise TypeError(f"@endpoint must decorate a function, not {type(m).__name__}.")
        return EndpointProperty(m, propagate, explicit_response_port, instrument)

    return wrap(method) if method is not None else wrap


def concurrent_endpoint(
    method: Callable[..., Any] | None = None,
    *,
    propagate: Any = None,
    explicit_response_port: bool = False,
    instrument: bool = True,
) -> Any:
    """An async endpoint whose body runs as a task: the actor takes its next message at once."""

    def wrap(m: Callable[..., Any]) -> EndpointProperty:
        if isinstance(m, EndpointProperty):
            raise ValueError(
                "concurrent_endpoint does not wrap @endpoint; pass endpoint options to "
                "@concurrent_endpoint"
            )
        if not inspect.iscoroutinefunction(m):
            raise ValueError("concurrent_endpoint can only wrap async endpoints")
        return EndpointProperty(m, propagate, explicit_response_port, instrument, concurrent=True)

    return wrap(method) if method is not None else wrap


_NOT_A_MESH = "actor implementations are not meshes, but we can't convince the typechecker of it..."


def _not_a_mesh(*args: Any, **kwargs: Any) -> Any:
    """Not available on an actor object (it is not a mesh): raises NotImplementedError.

    Use it on the actor mesh that `spawn` returned instead.
    """
    raise NotImplementedError(_NOT_A_MESH)


class Actor:
    """Base class of actors. Subclass it and mark methods with `@endpoint`.

    `__init__` receives the arguments given to `spawn` and runs on the actor's own thread before
    any message from the spawner. Optional hooks: `__supervise__(failure)` (a mesh this actor
    owns failed: return truthy if handled), `__cleanup__(exc)` (the actor stops: `exc` is None on
    a normal stop), `_handle_undeliverable_message(envelope)`.
    """

    @functools.cached_property
    def logger(self) -> logging.Logger:
        log = logging.getLogger(type(self).__name__)
        log.setLevel(logging.DEBUG)
        return log

    def _handle_undeliverable_message(self, envelope: Any) -> bool:
        return False

    # An actor class is typed as its mesh (spawn returns `T`), so the mesh protocol's names
    # exist on the object too; on the actor itself they raise, in torchmonarch's words.
    slice = flatten = split = rename = size = stop = _not_a_mesh
    extent = sizes = initialized = property(_not_a_mesh)

    def __len__(self) -> int:
        """Not available on an actor object (it is not a mesh): raises NotImplementedError."""
        raise NotImplementedError(_NOT_A_MESH)

    def __bool__(self) -> bool:
        # Unlike torchmonarch (where `bool(actor)` raises through `__len__`): an actor object
        # is always truthy, so `if actor:` in user or runtime code keeps working.
        return True


def endpoints_of(cls: type) -> dict[str, EndpointProperty]:
    """The endpoints of `cls` (inherited ones included), by name."""
    found: dict[str, EndpointProperty] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, EndpointProperty):
                found[name] = value
            elif name in found:
                del found[name]  # overridden by a plain attribute
    return found


# The texts of the errors below are torchmonarch's, word for word (sentences glued together
# included): programs match on them. Endpoint names are listed in `dir()` order, as there.
_MIXING = (
    "Synchronous endpoints cannot be mixed with async endpoints because they can cause the "
    "asyncio loop to deadlock if they wait."
)


def validate_actor_class(
    cls: Any,
    reserved: frozenset[str],
    mesh_class: type,
    init_args: tuple[Any, ...] | None = None,
    init_kwargs: dict[str, Any] | None = None,
) -> dict[str, EndpointProperty]:
    """Check `cls` can be spawned (with these `__init__` arguments, when given); return its
    endpoints. Raises ValueError naming the problem (an endpoint named after one of the
    `reserved` attributes of `mesh_class`, the actor mesh class), or TypeError for arguments
    `__init__` does not take (inspect's message, as torchmonarch binds them at spawn too)."""
    if not isinstance(cls, type):
        raise TypeError("issubclass() arg 1 must be a class")
    if not issubclass(cls, Actor):
        raise ValueError(f"{cls} must subclass monarch.service.Actor to spawn it.")
    eps = endpoints_of(cls)
    for name in sorted(eps):
        if name in reserved:
            raise ValueError(
                "ActorMesh has an attribute that collides with an endpoint name: "
                f"attribute={name}, ActorMesh.{name}={getattr(mesh_class, name, None)}, "
                f"endpoint={eps[name]}"
            )
    sync = [n for n in sorted(eps) if not eps[n]._is_async]
    asyn = [n for n in sorted(eps) if eps[n]._is_async]
    if sync and asyn:
        raise ValueError(
            f"{cls} mixes both async and sync endpoints.{_MIXING}sync: {sync} async: {asyn}"
        )
    cleanup = getattr(cls, "__cleanup__", None)
    async_cleanup = None if cleanup is None else inspect.iscoroutinefunction(cleanup)
    if sync and async_cleanup:
        raise ValueError(
            f"{cls} has sync endpoints, but an async __cleanup__. Make sure __cleanup__ is also "
            f"synchronous.{_MIXING}sync: {sync}"
        )
    if asyn and async_cleanup is False:
        raise ValueError(
            f"{cls} has async endpoints, but a synchronous __cleanup__. Make sure __cleanup__ is "
            f"also async.{_MIXING}async: {asyn}"
        )
    if sync and inspect.iscoroutinefunction(getattr(cls, "__supervise__", None)):
        raise ValueError(
            f"{cls} has sync endpoints, but an async __supervise__. Make sure __supervise__ is "
            f"also synchronous. sync: {sync}"
        )
    if sync and inspect.iscoroutinefunction(getattr(cls, "_handle_undeliverable_message", None)):
        raise ValueError(
            f"{cls} has sync endpoints, but an async _handle_undeliverable_message. Make sure "
            f"_handle_undeliverable_message is also synchronous. sync: {sync}"
        )
    if init_args is not None and cls.__init__ is not object.__init__:
        try:
            signature = inspect.signature(cls.__init__)
        except (TypeError, ValueError):  # no introspectable signature: __init__ will tell
            return eps
        signature.bind(None, *init_args, **(init_kwargs or {}))
    return eps
