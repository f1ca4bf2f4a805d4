"""Endpoints on meshes and their adverbs: call, call_one, choose, stream, broadcast, send.

Every adverb does the same three things at the call site, in the caller's thread: bind the
arguments against the endpoint's signature (a mismatch raises `TypeError` before anything is
sent), pickle them once (a pickling error raises here, naming the type), and post one `CALL`
envelope per target rank to that rank's proc. They differ only in the reply port they open.
"""

from __future__ import annotations

import concurrent.futures
import pickle
import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from monarch._src.mesh import casting, hooks, traffic
from monarch._src.mesh.actor import EndpointProperty
from monarch._src.mesh.call_future import MeshFuture
from monarch._src.runtime.future import Future
from monarch._src.runtime.ports import GatherPort, StreamPort, ValuePort, decode_reply
from monarch._src.runtime.runtime import get_runtime
from monarch._src.shape import Shape, Slice
from monarch._src.supervision.errors import SupervisionError

if TYPE_CHECKING:
    from monarch._src.mesh.actor_mesh import ActorMesh
    from monarch._src.mesh.port import Port

__all__ = ["Endpoint", "NotAnEndpoint", "as_endpoint", "send"]

P = ParamSpec("P")
R = TypeVar("R")

class _Withdraw:
    """What `Future.cancel` calls to withdraw a posted call: one small callable object, not a
    closure or a bound method (fewer objects for the collector per call in flight)."""

    __slots__ = ("endpoint", "ranks", "reply")

    def __init__(self, endpoint: Endpoint[..., Any], reply: Any, ranks: list[int] | None) -> None:
        self.endpoint = endpoint
        self.reply = reply  # the reply port the calls answer to
        self.ranks = ranks  # the targeted local ranks, None for all

    def __call__(self) -> str:
        endpoint, ranks = self.endpoint, self.ranks
        casting.cancel_call(endpoint._mesh, self.reply, ranks)
        n = len(endpoint._mesh) if ranks is None else len(ranks)
        return f"the call to {endpoint._label()} on {n} rank{'s' if n != 1 else ''}"


def _by_method() -> str:
    """`_OneCall._cancel` until it is cancelled: the call is withdrawn by `_OneCall._withdraw`."""
    raise AssertionError("not called: _OneCall._canceller gives _OneCall._withdraw")


class _OneCall(Future[Any]):
    """The Future of a call to one rank (`call_one`, `choose`), which decodes that rank's reply
    (counting it answered) and withdraws the call itself. One object per call in flight, where
    a Future with a decoder and a canceller took three: W3 keeps 10,000 calls in flight, and
    the garbage collector's passes over them took a third of its time (issue 30)."""

    __slots__ = ("_endpoint", "_port", "_rank", "_spawned")

    _endpoint: Endpoint[..., Any]
    # The id of the call's reply port in this process's port table: its address, a tuple,
    # would be one more object per call for the collector.
    _port: int
    _rank: int  # the view's rank it went to
    _spawned: int  # that rank in the mesh as spawned (the traffic counters')

    def _decode_raw(self, raw: Any) -> Any:
        endpoint = self._endpoint
        traffic.count_answered(endpoint._mesh._key, self._spawned)
        if type(raw) is bytes:  # a plain value (`ValuePort`)
            return pickle.loads(raw)
        return endpoint._decode_one(raw)

    def _canceller(self) -> Callable[[], str] | None:
        return None if self._cancel is None else self._withdraw

    def _withdraw(self) -> str:
        reply = (get_runtime().mailbox.address, self._port)
        return _Withdraw(self._endpoint, reply, [self._rank])()


class Endpoint(Generic[P, R]):
    """An endpoint of an actor mesh (or a slice of one), with the adverbs.

    Typed as torchmonarch's: `Endpoint[P, R]`, `P` the parameters after `self`, `R` what it
    returns (`Endpoint[..., int]` in annotations).
    """

    __slots__ = ("_binder", "_explicit", "_map_error", "_mesh", "_method", "_name",
                 "_propagator")

    def __init__(
        self, mesh: ActorMesh[Any], name: str, method: Callable[..., Any], explicit: bool,
        propagator: Any = None,
    ) -> None:
        self._mesh = mesh
        self._name = name
        self._method = method  # the undecorated function, for binding arguments
        self._explicit = explicit  # the method takes a response port after self
        # as_endpoint(propagate=...): shapes `rref` results (else the @endpoint's propagate)
        self._propagator = propagator
        # `_supervision`, bound once: every call's Future holds it.
        self._map_error: Callable[[BaseException], BaseException] = self._supervision
        self._binder: Any = None  # checks call arguments (`casting.encode_args`), made once

    # ---- the common path ----------------------------------------------------------------
    def _label(self) -> str:
        return f"{self._mesh._name}.{self._name}"

    def _propagate(self) -> Any:
        """The function that shapes `rref` results: as_endpoint's `propagate`, else the
        @endpoint's (None when neither gave one)."""
        if self._propagator is not None:
            return self._propagator
        prop = getattr(self._mesh._class, self._name, None)
        return prop._propagator if isinstance(prop, EndpointProperty) else None

    def _post(self, encoded: casting.Encoded, reply: Any, ranks: list[int] | None = None,
              gathered: bool = False, cast: casting.CastPlan | None = None) -> None:
        """Post one CALL per target: all ranks, or the given local ranks (`gathered`: `reply` is
        a `GatherPort`; `cast`: the plan, looked up and checked usable by the caller)."""
        payload = encoded.payload
        if type(payload) is not tuple:  # distributed tensors among the arguments
            payload.post(self, reply, ranks, encoded.handed)
            return
        casting.post_call(self._mesh, self._name, encoded, reply, ranks, gathered=gathered,
                          checked=cast is not None, cast=cast)

    def _supervision(self, err: BaseException) -> BaseException:
        if isinstance(err, SupervisionError) and err.endpoint is None:
            err = SupervisionError(self._mesh._actor_report(err.report),
                                   f"{self._mesh._name}.{self._name}")
        return err

    def _canceller(self, reply: Any, ranks: list[int] | None) -> Callable[[], str]:
        """What `Future.cancel` runs for the call to `ranks` (default all) replying to `reply`."""
        return _Withdraw(self, reply, ranks)

    def _decode_one(self, reply: Any) -> Any:
        try:
            return decode_reply(reply)
        except SupervisionError as err:
            raise self._supervision(err) from None

    # ---- adverbs ------------------------------------------------------------------------
    def call_one(self, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Call the single actor of this mesh; returns its value."""
        cast = self._mesh._plan or casting.plan(self._mesh)
        n = len(cast.ranks)
        if n != 1:
            raise ValueError(f"call_one requires exactly 1 actor, but mesh has {n}")
        return self._single(0, args, kwargs, cast)

    def choose(self, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Call one actor of this mesh picked at random; returns its value."""
        cast = casting.plan(self._mesh)
        n = len(cast.ranks)
        if n == 0:
            raise ValueError(
                f"choose needs at least one actor, but mesh {self._mesh._name} is empty"
            )
        return self._single(random.randrange(n), args, kwargs, cast)

    def _refused(self, cast: casting.CastPlan) -> concurrent.futures.Future[Any] | None:
        """A failed future when the mesh (or a targeted rank) already failed or was stopped:
        as in Monarch, such a call returns a future that raises."""
        try:
            casting.check(self._mesh, self._name, cast)
        except SupervisionError as err:
            cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
            cf.set_exception(err)
            return cf
        return None

    def _single(self, rank: int, args: tuple[Any, ...], kwargs: dict[str, Any],
                cast: casting.CastPlan) -> Future[R]:
        encoded = casting.encode_args(self, args, kwargs)
        mesh = self._mesh
        entry = ValuePort()
        spawned = mesh._spawned_rank(rank)
        reply = casting.post_one(mesh, self._name, encoded, entry, rank, spawned, cast)
        if reply is None:  # the general path
            refused = self._refused(cast)
            if refused is not None:
                return Future.from_concurrent(refused, None, self._supervision)
            # The proc of `rank`, and its host's relay when calls go through one.
            reply = get_runtime().mailbox.open_port(entry, cast.procs_of([rank]))
            self._post(encoded, reply, [rank], cast=cast)
        fut: _OneCall = _OneCall.from_concurrent(  # type: ignore[assignment]
            entry, None, self._map_error, _by_method)
        fut._endpoint, fut._port, fut._rank, fut._spawned = self, reply[1], rank, spawned
        return fut

    def call(self, *args: P.args, **kwargs: P.kwargs) -> MeshFuture[R]:
        """Call every actor; gather the replies into a ValueMesh shaped like this mesh.

        The future is a `MeshFuture`: `partial()`, iteration and `progress()` show the replies
        as they come. A call to a mesh that already failed or was stopped fails at once, with
        every rank failed.
        """
        encoded = casting.encode_args(self, args, kwargs)
        mesh = self._mesh
        cast = casting.plan(mesh)
        n = len(mesh)
        entry = GatherPort(n)
        shape = Shape(list(mesh._shape.labels), Slice.new_row_major(mesh._shape.ndslice.sizes))
        refused = self._refused(cast)
        if refused is not None:
            error = refused.exception()
            assert error is not None
            entry.fail(error)
            return MeshFuture.of_call(entry, shape, self._decode_one, lambda: None,
                                      self._supervision, None, self._label)
        reply = get_runtime().mailbox.open_port(entry, cast.procs_of())
        self._post(encoded, reply, gathered=True, cast=cast)

        spawned = mesh._spawned_local(range(n))

        def answered() -> None:
            for rank in spawned:
                traffic.count_answered(mesh._key, rank)

        return MeshFuture.of_call(entry, shape, self._decode_one, answered, self._supervision,
                                  self._canceller(reply, None), self._label)

    def stream(self, *args: P.args, **kwargs: P.kwargs) -> Iterator[Future[R]]:
        """Call every actor; yield one future per reply, in arrival order."""
        encoded = casting.encode_args(self, args, kwargs)
        mesh = self._mesh
        cast = casting.plan(mesh)
        refused = self._refused(cast)
        if refused is not None:
            return iter([Future.from_concurrent(refused, None, self._supervision)
                         for _ in range(len(mesh))])
        entry = StreamPort(len(mesh))
        reply = get_runtime().mailbox.open_port(entry, cast.procs_of())
        self._post(encoded, reply, cast=cast)
        cancel = self._canceller(reply, None)
        futures = [Future.from_concurrent(cf, self._decode_one, self._supervision, cancel)
                   for cf in entry.cfs]
        return iter(futures)

    def broadcast(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Send to every actor without waiting; an exception there fails the actor."""
        self._post(casting.encode_args(self, args, kwargs), None)

    # ---- tensor engine (monarch._src.tensor) ---------------------------------------------
    def rref(self, *args: Any, **kwargs: Any) -> Any:
        """Under `activate()`: call every actor and keep each result on its proc as a
        distributed tensor (shaped by the endpoint's `propagate`)."""
        return hooks.rref.require()(self, args, kwargs)

    def _send(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], port: Port[Any] | None, selection: str
    ) -> None:
        encoded = casting.encode_args(self, args, kwargs)
        reply = port._addr if port is not None else None
        if selection == "all":
            self._post(encoded, reply)
        elif selection == "choose":
            self._post(encoded, reply, [random.randrange(len(self._mesh))])
        else:
            raise ValueError(f"Invalid selection: {selection}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # torchmonarch's endpoints are not callable; say so in the same words.
        raise TypeError(
            "'monarch._rust_bindings.monarch_hyperactor.endpoint.ActorEndpoint' object is not "
            "callable"
        )

    def __repr__(self) -> str:
        # Monarch's endpoints are Rust objects with the default repr under the binding's path.
        return (
            f"<monarch._rust_bindings.monarch_hyperactor.endpoint.ActorEndpoint object at "
            f"{id(self):#x}>"
        )


class NotAnEndpoint:
    """What a mesh gives for a class attribute that is not an endpoint."""

    __slots__ = ("_mesh", "_name")

    def __init__(self, mesh: ActorMesh[Any], name: str) -> None:
        self._mesh = mesh
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # torchmonarch's words (the one run-on sentence included).
        raise RuntimeError(
            f"Actor {self._mesh._class}.{self._name} is not annotated as an endpoint. To call it "
            "as one, add a @endpoint decorator to it, or directly wrap it in one "
            "as_endpoint(obj.method).call(...)"
        )

    def __repr__(self) -> str:
        # Monarch's default object repr, under its module path.
        return f"<monarch._src.actor.endpoint.NotAnEndpoint object at {id(self):#x}>"


def as_endpoint(
    not_an_endpoint: Any,
    *,
    propagate: Any = None,
    explicit_response_port: bool = False,
) -> Endpoint[..., Any]:
    """Treat a plain method of a spawned actor mesh as an endpoint; `propagate` shapes the
    results of `rref` as `@endpoint(propagate=...)` does."""
    if not isinstance(not_an_endpoint, NotAnEndpoint):
        # An endpoint is refused too, as on torchmonarch: it needs no as_endpoint.
        raise ValueError("expected an method of a spawned actor")
    mesh, name = not_an_endpoint._mesh, not_an_endpoint._name
    method = getattr(mesh._class, name)
    if isinstance(method, EndpointProperty):
        method = method._method
    return Endpoint(mesh, name, method, explicit_response_port, propagate)


def send(
    endpoint: Endpoint[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    port: Port[Any] | None = None,
    selection: str = "all",
) -> None:
    """Low-level cast: each target's return value goes to `port` (tagged with its rank)."""
    # The tensor engine's remote functions (a layer above) send through their own `_send`.
    if not isinstance(endpoint, Endpoint) and not hasattr(type(endpoint), "_monarch_sendable"):
        raise TypeError(f"send expects an Endpoint (mesh.method), not {type(endpoint).__name__}.")
    endpoint._send(tuple(args), dict(kwargs or {}), port, selection)
