"""Endpoint rules enforced on the client: class validation at spawn, decorator misuse,
non-endpoint attributes, argument binding and pickling before sending, and arguments that travel
by value (lambdas, closures, local classes).

Every test spawns fresh actors on the session's shared proc meshes; no test here stops or
damages a proc. Spawns that must be rejected run with the fault hook recorded, so a missing
check shows up as a failed test rather than a client exit.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from monarch.actor import (
    Actor,
    as_endpoint,
    concurrent_endpoint,
    current_rank,
    endpoint,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0


class Mixed(Actor):
    @endpoint
    def sync_one(self) -> int:
        return 1

    @endpoint
    async def async_one(self) -> int:
        return 1


class SyncWithAsyncCleanup(Actor):
    @endpoint
    def value(self) -> int:
        return 1

    async def __cleanup__(self, exc: Exception | None) -> None:
        pass


class AsyncWithSyncCleanup(Actor):
    @endpoint
    async def value(self) -> int:
        return 1

    def __cleanup__(self, exc: Exception | None) -> None:
        pass


class SliceCollision(Actor):
    @endpoint
    def slice(self) -> int:
        return 1


class StopCollision(Actor):
    @endpoint
    def stop(self) -> int:
        return 1


class NotAnActor:
    @endpoint
    def value(self) -> int:
        return 1


class Strict(Actor):
    def __init__(self) -> None:
        self.calls = 0

    @endpoint
    def add(self, a: int, b: int = 0) -> int:
        self.calls += 1
        return a + b

    @endpoint
    def echo(self, value: Any) -> Any:
        self.calls += 1
        return value

    @endpoint
    def count(self) -> int:
        return self.calls

    def helper(self) -> str:
        return f"helper on {current_rank().rank}"


class RefusesPickling:
    def __getstate__(self) -> dict[str, Any]:
        raise RuntimeError("refuses to be pickled")


class Runner(Actor):
    @endpoint
    def apply(self, fn: Any, *args: Any) -> Any:
        return fn(current_rank().rank, *args)


# --- decorator misuse ----------------------------------------------------------------------


def test_concurrent_endpoint_on_sync_method_raises_value_error() -> None:
    def sync_method(self: Actor) -> int:
        return 1

    with pytest.raises(ValueError, match="concurrent_endpoint can only wrap async endpoints"):
        concurrent_endpoint(sync_method)


def test_concurrent_endpoint_stacked_on_endpoint_raises_value_error() -> None:
    async def async_method(self: Actor) -> int:
        return 1

    with pytest.raises(ValueError, match="@endpoint"):
        concurrent_endpoint(endpoint(async_method))


def test_concurrent_endpoint_counts_as_explicit_port_but_its_method_takes_none() -> None:
    # Monarch reports concurrent endpoints as explicit-response-port endpoints (they answer
    # through a port when their task ends); the method itself is still called without one.
    async def wait(self: Actor) -> int:
        return 1

    async def with_port(self: Actor, port: Any) -> None:
        port.send(1)

    plain = concurrent_endpoint(wait)
    explicit = concurrent_endpoint(with_port, explicit_response_port=True)
    assert plain._explicit_response_port and not plain._takes_port
    assert explicit._explicit_response_port and explicit._takes_port
    assert not endpoint(wait)._explicit_response_port


# --- class validation at spawn (§1.1.1, §4.26) --------------------------------------------------


def test_spawn_class_mixing_sync_and_async_endpoints_raises_value_error(
    procs2: Any, fault_recorder: Any
) -> None:
    with pytest.raises(ValueError, match="mixes both async and sync"):
        procs2.spawn("val_mixed", Mixed)


@pytest.mark.parametrize("cls", [SyncWithAsyncCleanup, AsyncWithSyncCleanup])
def test_spawn_cleanup_sync_ness_differs_from_endpoints_raises_value_error(
    procs2: Any, fault_recorder: Any, cls: type[Actor]
) -> None:
    with pytest.raises(ValueError):
        procs2.spawn(f"val_cleanup_mismatch_{cls.__name__}", cls)


@pytest.mark.parametrize("cls", [SliceCollision, StopCollision])
def test_spawn_endpoint_named_like_mesh_attribute_raises_value_error(
    procs2: Any, fault_recorder: Any, cls: type[Actor]
) -> None:
    with pytest.raises(
        ValueError, match="ActorMesh has an attribute that collides with an endpoint name"
    ):
        procs2.spawn(f"val_collision_{cls.__name__}", cls)


def test_spawn_non_actor_class_raises_value_error(procs2: Any, fault_recorder: Any) -> None:
    with pytest.raises(ValueError):
        procs2.spawn("val_not_an_actor", NotAnActor)


class NeedsArgs(Actor):
    def __init__(self, x: int, *, y: int = 0) -> None:
        self.total = x + y

    @endpoint
    def total_of(self) -> int:
        return self.total


class NotAMesh(Actor):
    @endpoint
    def attempt(self, what: str) -> str:
        attempts = {
            "slice": lambda: self.slice(gpus=0),
            "extent": lambda: self.extent,
            "len": lambda: len(self),
            "stop": lambda: self.stop(),
        }
        try:
            attempts[what]()
        except NotImplementedError as exc:
            return str(exc)
        return "no error"

    @endpoint
    def truthy(self) -> bool:
        return bool(self)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing a required argument: 'x'"),
        ((1, 2), {}, "too many positional arguments"),
        ((1,), {"z": 2}, "got an unexpected keyword argument 'z'"),
    ],
)
def test_spawn_arguments_init_does_not_take_raise_type_error_at_spawn(
    procs2: Any, fault_recorder: Any, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    # Bound against __init__ before anything is sent, as torchmonarch does: no actor starts.
    with pytest.raises(TypeError, match=f"^{message}$"):
        procs2.spawn("val_init_args", NeedsArgs, *args, **kwargs)
    assert fault_recorder.failures == []


def test_spawn_arguments_init_takes_reach_it(procs2: Any) -> None:
    mesh = procs2.spawn("val_init_args_ok", NeedsArgs, 1, y=2)
    assert list(mesh.total_of.call().get(timeout=TIMEOUT).values()) == [3, 3]


@pytest.mark.parametrize("name", ["slice", "extent", "len", "stop"])
def test_mesh_protocol_on_actor_object_raises_not_implemented(procs2: Any, name: str) -> None:
    mesh = procs2.spawn(f"val_not_a_mesh_{name}", NotAMesh).slice(gpus=0)
    assert mesh.attempt.call_one(name).get(timeout=TIMEOUT) == (
        "actor implementations are not meshes, but we can't convince the typechecker of it..."
    )
    assert mesh.truthy.call_one().get(timeout=TIMEOUT) is True


def test_spawn_non_class_raises_type_error(procs2: Any) -> None:
    with pytest.raises(TypeError, match=r"issubclass\(\) arg 1 must be a class"):
        procs2.spawn("val_not_a_class", 3)


# --- calling endpoints and non-endpoints ---------------------------------------------------------


def test_plain_method_call_raises_runtime_error_suggesting_as_endpoint(procs2: Any) -> None:
    mesh = procs2.spawn("val_plain_call", Strict)
    with pytest.raises(RuntimeError, match="not annotated as an endpoint") as info:
        mesh.helper()
    assert "as_endpoint" in str(info.value)


def test_as_endpoint_plain_method_is_callable_remotely(procs2: Any) -> None:
    mesh = procs2.spawn("val_as_endpoint", Strict)
    assert as_endpoint(mesh.slice(gpus=1).helper).call_one().get(timeout=TIMEOUT) == "helper on 0"
    assert list(as_endpoint(mesh.helper).call().get(timeout=TIMEOUT).values()) == [
        "helper on 0",
        "helper on 1",
    ]


def test_as_endpoint_non_mesh_method_raises_value_error() -> None:
    with pytest.raises(ValueError):
        as_endpoint(lambda: 1)


def test_unknown_attribute_on_actor_mesh_raises_attribute_error(procs2: Any) -> None:
    mesh = procs2.spawn("val_unknown_attr", Strict)
    with pytest.raises(AttributeError):
        mesh.no_such_endpoint  # noqa: B018


@pytest.mark.parametrize("adverb", ["call", "call_one", "broadcast"])
def test_endpoint_wrong_arguments_raise_type_error_before_sending(procs2: Any, adverb: str) -> None:
    one = procs2.spawn(f"val_bad_args_{adverb}", Strict).slice(gpus=0)
    bad_calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1, 2, 3), {}),  # too many positional arguments
        ((), {}),  # missing `a`
        ((1,), {"c": 2}),  # unexpected keyword
    ]
    for args, kwargs in bad_calls:
        with pytest.raises(TypeError):
            getattr(one.add, adverb)(*args, **kwargs)
    # Nothing reached the actor: the arguments were checked before sending.
    assert one.count.call_one().get(timeout=TIMEOUT) == 0


def test_endpoint_unpicklable_argument_raises_at_call_site(procs2: Any) -> None:
    one = procs2.spawn("val_unpicklable", Strict).slice(gpus=0)
    with pytest.raises(TypeError, match="pickle"):
        one.echo.call_one(threading.Lock()).get(timeout=TIMEOUT)
    with pytest.raises(RuntimeError, match="refuses to be pickled"):
        one.echo.call_one(RefusesPickling()).get(timeout=TIMEOUT)
    assert one.count.call_one().get(timeout=TIMEOUT) == 0


def test_closure_and_local_class_arguments_travel_by_value(procs2: Any) -> None:
    class Box:
        def __init__(self, value: int) -> None:
            self.value = value

        def doubled(self) -> int:
            return self.value * 2

    offset = 100
    runner = procs2.spawn("val_closures", Runner)
    shifted = runner.apply.call(lambda rank: rank + offset).get(timeout=TIMEOUT)
    assert list(shifted.values()) == [100, 101]
    boxed = runner.apply.call(lambda rank, box: box.doubled() + rank, Box(21)).get(timeout=TIMEOUT)
    assert list(boxed.values()) == [42, 43]
