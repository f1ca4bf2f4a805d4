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
from typing import Any, Callable, TypeVar, overload

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
        self._explicit_response_port = explicit_response_port
        self._instrument = instrument
        self._concurrent = concurrent  # started as a task; the actor moves on at once
        self._is_async = inspect.iscoroutinefunction(method)
        functools.update_wrapper(self, method)  # type: ignore[arg-type]

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
                "concurrent_endpoint does not wrap @endpoint: use @concurrent_endpoint alone "
                f"on {m._method.__qualname__}."
            )
        if not inspect.iscoroutinefunction(m):
            raise ValueError("concurrent_endpoint can only wrap async endpoints")
        return EndpointProperty(m, propagate, explicit_response_port, instrument, concurrent=True)

    return wrap(method) if method is not None else wrap


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


def validate_actor_class(cls: Any, reserved: frozenset[str]) -> dict[str, EndpointProperty]:
    """Check `cls` can be spawned; return its endpoints. Raises ValueError naming the problem."""
    if not isinstance(cls, type) or not issubclass(cls, Actor):
        what = cls.__qualname__ if isinstance(cls, type) else repr(cls)
        raise ValueError(
            f"{what} is not an Actor subclass: spawn needs a class derived from "
            "monarch.actor.Actor."
        )
    eps = endpoints_of(cls)
    collisions = sorted(set(eps) & reserved)
    if collisions:
        raise ValueError(
            f"ActorMesh has an attribute that collides with an endpoint name: "
            f"{', '.join(collisions)} on {cls.__qualname__}. Rename the endpoint."
        )
    # Concurrent endpoints are always async; what must not mix is sync and async bodies.
    kinds = {ep._is_async for ep in eps.values()}
    if len(kinds) > 1:
        sync = sorted(n for n, ep in eps.items() if not ep._is_async)
        asyn = sorted(n for n, ep in eps.items() if ep._is_async)
        raise ValueError(
            f"{cls.__qualname__} mixes both async and sync endpoints (sync: {', '.join(sync)}; "
            f"async: {', '.join(asyn)}). Make them all `def` or all `async def`."
        )
    cleanup = getattr(cls, "__cleanup__", None)
    if cleanup is not None and kinds:
        endpoints_async = kinds.pop()
        if inspect.iscoroutinefunction(cleanup) != endpoints_async:
            want = "async def" if endpoints_async else "def"
            raise ValueError(
                f"{cls.__qualname__}.__cleanup__ must be `{want}` like its endpoints."
            )
    return eps
