"""torchmonarch's `monarch._src.actor.mock`: actor and tensor-engine mocks for tests.

`patch_actor(Real, Mock)` makes every spawn of `Real` spawn `Mock` instead;
`patch_tensor_engine(SomeActor, factory)` makes actors of class `SomeActor` use
`factory(proc_mesh)` as the `DeviceMesh` of the proc meshes they activate (a simulated mesh when
no factory is given). Both work like `unittest.mock.patch`: as a context manager (sync or async)
or as a decorator of a sync or async function, restoring the previous state on exit, nested
patches included.

The registries are module dictionaries keyed by class object (two classes of the same name in
different scopes are different keys). The mesh layer consults them through hook slots
(`mesh/hooks.py`: `actor_class` in `ProcMesh.spawn`, `device_mesh_override` in
`ProcMesh.activate()` and friends) that this module fills on first use. Procs spawned while a
mock is active inherit both registries: the `proc_startup` slot hands `spawn_procs` a
`_RegistryRestorer` that each new proc runs before its bootstrap, so an actor in a proc that
spawns a mocked class gets the mock too. That copy is taken at `spawn_procs` time; patches made
later do not reach procs already running.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from monarch._src.lowlevel import current_hosted
from monarch._src.mesh import hooks
from monarch._src.mesh.actor import Actor

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.tensor.mesh import DeviceMesh

__all__ = [
    "TensorEngineFactory",
    "get_actor_class",
    "get_actor_mock_registry_state",
    "get_tensor_engine_factory",
    "get_tensor_engine_mock_registry_state",
    "patch_actor",
    "patch_tensor_engine",
    "set_actor_mock_registry_state",
    "set_tensor_engine_mock_registry_state",
]

#: What `patch_tensor_engine` calls to make an actor's device mesh for a proc mesh.
TensorEngineFactory = Callable[["ProcMesh"], "DeviceMesh"]

V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

# Original actor class -> the class spawned in its place.
_actor_registry: dict[type[Actor], type[Actor]] = {}
# Actor class -> the factory of the device meshes its actors use.
_tensor_engine_registry: dict[type[Actor], TensorEngineFactory] = {}

_ABSENT: Any = object()  # "no entry before this patch" (None could be a caller's value)
_hooks_lock = threading.Lock()
_hooks_installed = False
# Proc mesh -> (factory, the device mesh it made): a proc mesh activated twice by a mocked
# actor keeps one mesh, as a real engine does. Weak: the entry goes with the proc mesh.
_mock_meshes: weakref.WeakKeyDictionary[Any, tuple[TensorEngineFactory, Any]] = (
    weakref.WeakKeyDictionary()
)


# ---- the patch object shared by both registries ------------------------------------------------
class _Patch(Generic[V]):
    """Sets `registry[key] = value` while active. A context manager (sync and async) and a
    decorator; leaving restores what was there before (an outer patch of the same key, or
    nothing), also when the block raises."""

    def __init__(self, registry: dict[type[Actor], V], key: type[Actor], value: V) -> None:
        self._registry = registry
        self._key = key
        self._value = value
        self._saved: list[Any] = []  # a stack, so the same patch object may be re-entered

    def __enter__(self) -> V:
        _install_hooks()
        self._saved.append(self._registry.get(self._key, _ABSENT))
        self._registry[self._key] = self._value
        return self._value

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        previous = self._saved.pop()
        if previous is _ABSENT:
            self._registry.pop(self._key, None)
        else:
            self._registry[self._key] = previous

    async def __aenter__(self) -> V:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise TypeError(
                f"{type(self).__name__} decorates a function; got {type(func).__name__} "
                f"{func!r}."
            )
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with self:
                    return await func(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return run  # type: ignore[return-value]


def _check_actor_class(cls: Any, what: str, role: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Actor)):
        raise TypeError(
            f"{what} takes an Actor subclass as its {role}; got {cls!r}. Pass the class itself "
            "(not an instance or a mesh)."
        )


# ---- actor mocks ---------------------------------------------------------------------------------
class patch_actor(_Patch[type[Actor]]):  # torchmonarch's name: used like a function
    """While active, `proc_mesh.spawn(name, original, ...)` spawns `mock` instead (with the
    same arguments), in this process and in the procs it spawns meanwhile."""

    def __init__(self, original: type[Actor], mock: type[Actor]) -> None:
        _check_actor_class(original, "patch_actor", "original (first argument)")
        _check_actor_class(mock, "patch_actor", "mock (second argument)")
        super().__init__(_actor_registry, original, mock)
        self.original = original
        self.mock = mock


def get_actor_class(cls: type[Actor]) -> type[Actor]:
    """The class a spawn of `cls` makes: its mock while patched, else `cls` itself."""
    return _actor_registry.get(cls, cls)


def get_actor_mock_registry_state() -> dict[type[Actor], type[Actor]]:
    """A copy of the actor mocks in force (original class -> mock), e.g. to send to a proc."""
    return dict(_actor_registry)


def set_actor_mock_registry_state(state: dict[type[Actor], type[Actor]]) -> None:
    """Add `state`'s actor mocks (as `get_actor_mock_registry_state` returns them)."""
    for original, mock in state.items():
        _check_actor_class(original, "set_actor_mock_registry_state", "keys")
        _check_actor_class(mock, "set_actor_mock_registry_state", "values")
    _install_hooks()
    _actor_registry.update(state)


# ---- tensor engine mocks -------------------------------------------------------------------------
def _create_simulated_tensor_engine(proc_mesh: ProcMesh) -> DeviceMesh:
    """The default mock engine: a simulated mesh of the proc mesh's size (its "hosts" dim as
    hosts, every other proc of a host as a gpu), which runs nothing and writes no trace."""
    from monarch._src.simulator.interface import Simulator

    sizes = dict(proc_mesh.sizes)
    hosts = sizes.get("hosts", 1)
    gpus = max(1, len(proc_mesh) // max(hosts, 1))
    sim = Simulator(hosts=hosts, gpus=gpus, trace_mode="stream_only", build_ir=True,
                    trace_path="", command_history_path="")
    mesh: DeviceMesh = sim.mesh
    return mesh


class patch_tensor_engine(_Patch[TensorEngineFactory]):  # torchmonarch's name
    """While active, an actor of class `actor_class` that activates a proc mesh
    (`proc_mesh.activate()`, `rank_tensor`, ...) gets `mock_factory(proc_mesh)` as its device
    mesh instead of a real tensor engine; without a factory, a simulated mesh of the same size.
    Procs spawned meanwhile inherit the patch."""

    def __init__(self, actor_class: type[Actor],
                 mock_factory: TensorEngineFactory | None = None) -> None:
        _check_actor_class(actor_class, "patch_tensor_engine", "actor_class (first argument)")
        if mock_factory is not None and not callable(mock_factory):
            raise TypeError(
                "patch_tensor_engine's mock_factory must be a callable taking a ProcMesh and "
                f"returning a DeviceMesh (or None for a simulated one); got {mock_factory!r}."
            )
        factory = mock_factory if mock_factory is not None else _create_simulated_tensor_engine
        super().__init__(_tensor_engine_registry, actor_class, factory)
        self.actor_class = actor_class
        self.mock_factory = factory


def get_tensor_engine_factory(cls: type[Actor]) -> TensorEngineFactory | None:
    """The mock tensor engine factory of actors of class `cls`, or None (a real engine)."""
    return _tensor_engine_registry.get(cls)


def get_tensor_engine_mock_registry_state() -> dict[type[Actor], TensorEngineFactory]:
    """A copy of the tensor engine mocks in force (actor class -> factory)."""
    return dict(_tensor_engine_registry)


def set_tensor_engine_mock_registry_state(state: dict[type[Actor], TensorEngineFactory]) -> None:
    """Add `state`'s tensor engine mocks (as `get_tensor_engine_mock_registry_state` returns)."""
    for cls, factory in state.items():
        _check_actor_class(cls, "set_tensor_engine_mock_registry_state", "keys")
        if not callable(factory):
            raise TypeError(
                "set_tensor_engine_mock_registry_state's values must be tensor engine factories "
                f"(callables taking a ProcMesh); got {factory!r} for {cls.__qualname__}."
            )
    _install_hooks()
    _tensor_engine_registry.update(state)


# ---- what the mesh layer calls (hook slots) ------------------------------------------------------
class _RegistryRestorer:
    """Run in a new proc before its bootstrap: installs the mocks its spawner had."""

    def __init__(self, actors: dict[type[Actor], type[Actor]],
                 engines: dict[type[Actor], TensorEngineFactory]) -> None:
        self.actors = actors
        self.engines = engines

    def __call__(self) -> None:
        set_actor_mock_registry_state(self.actors)
        set_tensor_engine_mock_registry_state(self.engines)


def _proc_startup() -> list[Callable[[], None]]:
    if not _actor_registry and not _tensor_engine_registry:
        return []
    return [_RegistryRestorer(dict(_actor_registry), dict(_tensor_engine_registry))]


def _spawn_class(cls: type) -> type:
    return _actor_registry.get(cls, cls)


def _device_mesh_override(proc_mesh: Any) -> Any:
    """The mock device mesh of `proc_mesh` for the calling actor, or None (real engine)."""
    hosted = current_hosted()
    obj = None if hosted is None else hosted.obj
    if obj is None:  # the client, or a thread of a proc that runs no actor
        return None
    factory = _tensor_engine_registry.get(type(obj))
    if factory is None:
        return None
    cached = _mock_meshes.get(proc_mesh)
    if cached is not None and cached[0] is factory:
        return cached[1]
    mesh = factory(proc_mesh)
    _mock_meshes[proc_mesh] = (factory, mesh)
    return mesh


def _install_hooks() -> None:
    """Fill the mesh layer's mock slots (once per process; empty registries cost nothing)."""
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        hooks.actor_class.install(_spawn_class)
        hooks.proc_startup.install(_proc_startup)
        hooks.device_mesh_override.install(_device_mesh_override)
        _hooks_installed = True
