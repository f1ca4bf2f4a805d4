"""Actor and tensor-engine mocks (`monarch._src.actor.mock`): the registries, the patch objects'
restore rules, and their effect on real spawns, in this process and in procs spawned while a
patch is active."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.actor.mock import (
    get_actor_class,
    get_actor_mock_registry_state,
    get_tensor_engine_factory,
    patch_actor,
    patch_tensor_engine,
    set_actor_mock_registry_state,
)
from monarch.actor import Actor, endpoint, this_host, this_proc

pytestmark = pytest.mark.timeout(120)


class Real(Actor):
    @endpoint
    def kind(self) -> str:
        return "real"


class Fake(Actor):
    @endpoint
    def kind(self) -> str:
        return "fake"


class Other(Actor):
    @endpoint
    def kind(self) -> str:
        return "other"


class Spawner(Actor):
    """Lives in a proc spawned under a patch; spawns `Real` there and reports what it got."""

    @endpoint
    def spawn_real(self) -> tuple[str, str]:
        inner = this_proc().spawn("inner", Real)
        return get_actor_class(Real).__name__, inner.kind.call_one().get()

    @endpoint
    def engine(self, pm: Any) -> tuple[Any, Any, int]:
        with pm.activate() as first, pm.activate() as second:
            return first, second, len(_ENGINES_MADE)


_ENGINES_MADE: list[Any] = []  # in the proc: every engine `_counting_engine` made


class _CountingEngine:
    """What `_counting_engine` returns in place of a DeviceMesh: activating it yields the size
    of the proc mesh it was made for."""

    def __init__(self, size: int) -> None:
        self.size = size

    def activate(self) -> contextlib.AbstractContextManager[int]:
        return contextlib.nullcontext(self.size)


def _counting_engine(proc_mesh: Any) -> _CountingEngine:
    engine = _CountingEngine(len(proc_mesh))
    _ENGINES_MADE.append(engine)
    return engine


@pytest.fixture(autouse=True)
def no_mocks_left() -> Iterator[None]:
    yield
    assert get_actor_mock_registry_state() == {}
    assert get_tensor_engine_factory(Spawner) is None


def test_nested_patches_restore_the_outer_one_even_after_an_error() -> None:
    with patch_actor(Real, Fake):
        with pytest.raises(KeyError), patch_actor(Real, Other):
            assert get_actor_class(Real) is Other
            raise KeyError("boom")
        assert get_actor_class(Real) is Fake
    assert get_actor_class(Real) is Real


def test_one_patch_object_reentered_unwinds_in_order() -> None:
    patch = patch_actor(Real, Fake)
    with patch, patch_actor(Real, Other), patch:
        assert get_actor_class(Real) is Fake
    assert get_actor_class(Real) is Real


def test_decorated_sync_and_async_functions_see_the_patch_only_while_running() -> None:
    @patch_tensor_engine(Real, _counting_engine)
    def sync() -> Any:
        return get_tensor_engine_factory(Real)

    @patch_actor(Real, Fake)
    async def run_async() -> Any:
        return get_actor_class(Real)

    assert sync() is _counting_engine and get_tensor_engine_factory(Real) is None
    assert asyncio.run(run_async()) is Fake and get_actor_class(Real) is Real


def test_bad_arguments_name_the_patch_and_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"patch_actor takes an Actor subclass as its mock"):
        patch_actor(Real, Fake())
    with pytest.raises(TypeError, match=r"patch_tensor_engine takes an Actor subclass"):
        patch_tensor_engine(object)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"mock_factory must be a callable"):
        patch_tensor_engine(Real, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"decorates a function"):
        patch_actor(Real, Fake)(3)  # type: ignore[type-var]
    with pytest.raises(TypeError, match=r"set_actor_mock_registry_state takes an Actor"):
        set_actor_mock_registry_state({Real: "Fake"})  # type: ignore[dict-item]
    assert get_actor_class(Real) is Real


def test_spawn_under_a_patch_makes_the_mock(procs2: Any) -> None:
    with patch_actor(Real, Fake):
        mocked = procs2.spawn("mocked", Real)
    plain = procs2.spawn("plain", Real)
    assert mocked.kind.call().get().values() == ["fake", "fake"]
    assert plain.kind.call().get().values() == ["real", "real"]


def test_procs_spawned_under_patches_inherit_them() -> None:
    with patch_actor(Real, Fake), patch_tensor_engine(Spawner, _counting_engine):
        procs = this_host().spawn_procs(per_host={"gpus": 1}, name="mocked")
    try:
        spawner = procs.spawn("spawner", Spawner)
        # The proc's registry is its own copy: the client's patch has ended.
        assert spawner.spawn_real.call_one().get() == ("Fake", "fake")
        # The mocked engine is made once per proc mesh, for the actor's class only.
        assert spawner.engine.call_one(procs).get() == (1, 1, 1)
    finally:
        procs.stop().get(timeout=60)


def test_default_tensor_engine_mock_is_a_simulated_mesh_of_the_same_size(procs2: Any) -> None:
    from monarch._src.actor.mock import _create_simulated_tensor_engine

    mesh = _create_simulated_tensor_engine(procs2)
    assert dict(mesh.sizes) == {"host": 1, "gpu": 2}
