"""`ActorMesh`: one actor per proc of a proc mesh, addressed by named dimensions.

The mesh that `spawn` returns is *owned* by the spawner; slices and unpickled copies are
*references*: full messaging, no `stop`. The actors of one mesh share one key in every proc's
mailbox; a rank's address is its proc's address plus that key.
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from monarch._src.config import duration_seconds
from monarch._src.mesh import casting, traffic
from monarch._src.mesh.actor import EndpointProperty, endpoints_of, validate_actor_class
from monarch._src.mesh.casting import CastPlan
from monarch._src.mesh.context import instance_of
from monarch._src.mesh.control_ops import ActorReady, StopActor
from monarch._src.mesh.endpoint import Endpoint, NotAnEndpoint
from monarch._src.mesh.html import mesh_html
from monarch._src.mesh.ownership import after, tree
from monarch._src.mesh.rank_state import RankState, actor_rank_state
from monarch._src.mesh.spawn_info import extent_of
from monarch._src.mesh.upgrade_caller import upgrade_mesh
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import encode
from monarch._src.runtime.future import Future
from monarch._src.runtime.ports import CountPort, GatherPort
from monarch._src.runtime.runtime import get_runtime
from monarch._src.shape import MeshTrait, Point, Shape
from monarch._src.supervision.errors import SupervisionError, failure_report
from monarch._src.transport.serialization import by_value

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh

__all__ = ["RESERVED_NAMES", "ActorMesh"]

T = TypeVar("T")


class _UpgradeAttribute:
    """`mesh.upgrade`: the mesh's own `upgrade` method, unless its actors have an endpoint
    named `upgrade` (as Monarch code may), which it then is.

    `mesh.upgrade(NewClass)` swaps the code of the running actors for `NewClass`'s without
    restarting their procs (a class redefined in a notebook cell): each actor keeps its
    `__dict__`, becomes an instance of `NewClass` and, if `NewClass` defines
    `__upgrade__(self, old_state)`, runs it with a copy of its old `__dict__`. The upgrade is
    queued behind the calls sent before it, which finish on the old code; later calls run the
    new code. A class from an imported module travels by value (its edited code, not what the
    procs imported). All ranks or none: if `__upgrade__` raises on any rank, every rank goes
    back to its old class and state (nested objects included) and the returned future raises
    an `ActorError` naming the mesh, the failing ranks and their exceptions (`mesh/upgrade.py`).
    Returns a `Future[None]`, done once every actor applied the outcome. torchmonarch 0.7.0 has
    no `upgrade`: this is an extension.
    """

    def __get__(self, mesh: ActorMesh[Any] | None, owner: type) -> Any:
        if mesh is None:
            return self
        if "upgrade" in mesh._endpoints:
            return mesh.__getattr__("upgrade")
        return mesh._upgrade


class ActorMesh(MeshTrait, Generic[T]):
    """A mesh of actors of one class; attributes named after its endpoints are `Endpoint`s."""

    _class: type
    _name: str  # spawn name
    _key: str  # the actors' key in every proc's mailbox
    _proc_mesh: ProcMesh  # the (root) proc mesh the actors live on
    _mesh_shape: Shape  # over global proc ranks of `_proc_mesh`
    _owned: bool  # only the owned mesh may be stopped
    _stopped: str | None  # reason, once this owned mesh was stopped
    _endpoints: dict[str, EndpointProperty]
    _cache: dict[str, Any]  # name -> Endpoint, built on first access (also in __dict__)
    _plan: CastPlan | None  # built on first use (`casting.plan`)
    _spawned_ranks: list[int]  # global proc ranks of the mesh as spawned
    _local: dict[int, int] | None  # built from _spawned_ranks on first use
    # Rank as spawned of each rank of this view, built on first use (`_spawned_local`).
    _spawned_of_view: list[int] | None = None
    # The mesh spawn returned, for it and its slices (whose `_check_usable` sees it stopped
    # once the tree forgot it); an unpickled reference is its own.
    _origin: ActorMesh[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "ActorMesh cannot be constructed directly. Spawn one with "
            "proc_mesh.spawn(name, ActorClass, *args)."
        )

    @classmethod
    def _create(
        cls,
        actor_class: type,
        name: str,
        key: str,
        proc_mesh: ProcMesh,
        shape: Shape,
        owned: bool,
        spawned_ranks: list[int] | None = None,
        origin: ActorMesh[Any] | None = None,
    ) -> ActorMesh[Any]:
        mesh = object.__new__(cls)
        mesh._class = actor_class
        mesh._name = name
        mesh._key = key
        mesh._proc_mesh = proc_mesh
        mesh._mesh_shape = shape
        mesh._owned = owned
        mesh._stopped = None
        mesh._endpoints = endpoints_of(actor_class)
        mesh._cache = {}
        mesh._plan = None
        mesh._spawned_ranks = shape.ranks() if spawned_ranks is None else spawned_ranks
        mesh._local = None
        mesh._origin = mesh if origin is None else origin
        return mesh

    # ---- mesh protocol --------------------------------------------------------------------
    @property
    def _shape(self) -> Shape:
        return self._mesh_shape

    def _new_with_shape(self, shape: Shape) -> ActorMesh[T]:
        sliced = ActorMesh._create(
            self._class, self._name, self._key, self._proc_mesh, shape, owned=False,
            spawned_ranks=self._spawned_ranks, origin=self._origin,
        )
        sliced._stopped = self._stopped
        return sliced

    def _spawned_local(self, ranks: Any) -> list[int]:
        """The spawned mesh's ranks (the tree's and the counters') of local ranks of this view."""
        spawned = self._spawned_of_view
        if spawned is None:
            spawned = self._spawned_view()
        return [spawned[r] for r in ranks]

    def _spawned_rank(self, rank: int) -> int:
        """`_spawned_local` of one rank."""
        spawned = self._spawned_of_view
        if spawned is None:
            spawned = self._spawned_view()
        return spawned[rank]

    def _spawned_view(self) -> list[int]:
        local = self._local_ranks()
        spawned = self._spawned_of_view = [local[g] for g in casting.plan(self).ranks]
        return spawned

    def _local_ranks(self) -> dict[int, int]:
        """Global proc rank -> rank within the mesh as spawned (the tree's ranks)."""
        local = self._local
        if local is None:
            local = self._local = {g: i for i, g in enumerate(self._spawned_ranks)}
        return local

    def _plainly_usable(self) -> bool:
        """Whether `_check_usable` passes for any ranks, read from flags alone (the call path's
        shortcut): the mesh is known here, neither it nor its procs were stopped, and none of
        their ranks failed. False says only that a closer look is needed."""
        table = self._proc_mesh._table
        return (self._stopped is None and table.stopped is None and not table.failed
                and tree.clean(self._key))

    def _check_usable(self, endpoint: str, ranks: list[int]) -> None:
        # Meshes spawned in this process (and their slices): a stopped mesh or a failed rank
        # fails the call at once, before anything is sent. References elsewhere learn it from
        # the callee. `ranks`: the global proc ranks of this view (its cast plan's).
        status = tree.status(self._key)
        if status is None and self._forgotten():
            status = (True, {})
        if status is not None and status[0] and self._stopped is None:
            self._stopped = "stopped by its owner"
        if self._stopped is not None:  # stopped wins over failed: it is what the owner did
            raise SupervisionError(
                f"actor mesh {self._name} has status: stopped ({self._stopped}); "
                "actor mesh is stopped",
                f"{self._name}.{endpoint}",
            )
        if status is not None and status[1]:
            failed = status[1]
            local = self._local_ranks()
            if any(local[rank] in failed for rank in ranks):
                # As in Monarch: the report of the mesh's first failure, as the failed actor's
                # callers saw it, whichever of its failed ranks this call targets.
                raise SupervisionError(next(iter(failed.values())), f"{self._name}.{endpoint}")
        self._proc_mesh._check_usable(self._name, endpoint, ranks)

    def _forgotten(self) -> bool:
        """Whether the tree forgot this mesh after it was stopped (its actors answered the
        stop, or its procs are gone: `_forget`, `proc_mesh.forget_table`)."""
        table = self._proc_mesh._table
        return self._origin._stopped is not None or (
            table.stopped is not None and self._key in table.actor_displays)

    def _forget(self) -> None:
        """Its actors answered the stop: drop this process's per-mesh records of it (the tree's,
        the message counters, the proc table's, the owner's `owned_meshes`), so actor meshes
        spawned and stopped on long-lived procs do not accumulate."""
        creator = self._proc_mesh._table.forget_actor_mesh(self._key)
        tree.forget(self._key)
        traffic.forget(self._key, len(self._spawned_ranks))
        owner = instance_of(creator)
        if owner is not None:
            try:
                owner.owned_meshes.remove(self)
            except ValueError:
                pass  # not in the list: forgotten already (stop and GC may both get here)

    def _actor_report(self, report: str) -> str:
        """A proc's failure (`report`) as the failure of this mesh's actor on that proc, in
        Monarch's words, when this process spawned the mesh and knows which proc it was."""
        table = self._proc_mesh._table
        display = table.actor_displays.get(self._key)
        if display is None or report.startswith("The actor "):
            return report
        for rank in casting.plan(self).ranks:
            if table.failed.get(rank) == report:
                prefix, labels, sizes = display
                point = Point(self._local_ranks()[rank], extent_of(labels, sizes))
                return failure_report(f"{prefix}{point!r}>", report)
        return report

    # ---- endpoints ------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and name not in self.__dict__.get("_endpoints", ()):
            raise AttributeError(name)
        prop = self._endpoints.get(name)
        if prop is not None:
            ep: Any = Endpoint(self, name, prop._method, prop._takes_port)
        elif hasattr(self._class, name):
            ep = NotAnEndpoint(self, name)
        else:
            raise AttributeError(name)  # torchmonarch's message: the bare name
        # Kept in the instance's dict, so the next `mesh.name` is a plain attribute read that
        # never reaches __getattr__ (every call starts with one).
        self._cache[name] = self.__dict__[name] = ep
        return ep

    # ---- lifecycle ------------------------------------------------------------------------
    @property
    def initialized(self) -> Future[None]:
        """Resolves once every actor ran `__init__`; raises if spawning failed."""
        entry = GatherPort(len(self))
        cast = casting.plan(self)
        targets = [cast.proc_of(r) for r in range(len(cast.ranks))]
        rt = get_runtime()
        mailbox = rt.mailbox
        reply = mailbox.open_port(entry, tuple(set(targets)))
        for i, proc in enumerate(targets):
            mailbox.post(proc, control(ActorReady(self._key, i), reply))
        idle = duration_seconds("actor_spawn_max_idle")
        name = self._name
        # The replies, or the actor_spawn_max_idle failure, whichever comes first (both are
        # settled on the runtime loop).
        outcome: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def settle(done: concurrent.futures.Future[Any]) -> None:
            if not outcome.done():
                error = done.exception()
                if error is not None:
                    outcome.set_exception(error)
                else:
                    outcome.set_result(done.result())

        def too_slow() -> None:
            if not outcome.done():
                outcome.set_exception(SupervisionError(
                    f"the actors of mesh {name} did not all finish __init__ within "
                    f"actor_spawn_max_idle ({idle:g}s)"))

        entry.cf.add_done_callback(settle)
        rt.call_soon(rt.loop.call_later, idle, too_slow)

        def check(replies: list[Any]) -> None:
            from monarch._src.runtime.ports import decode_reply

            for r in replies:
                try:
                    decode_reply(r)
                except Exception as exc:
                    raise RuntimeError(f"error spawning actor mesh {self._name}: {exc}") from exc
            return None

        return Future.from_concurrent(outcome, check)

    def _upgrade(self, new_class: type) -> Future[None]:
        """Swap the code of the running actors of this view for `new_class`'s, keeping their
        state (see `upgrade`)."""
        if not isinstance(new_class, type):
            raise TypeError(
                f"upgrade({new_class!r}) of actor mesh {self._name}: expected the new actor "
                "class, e.g. mesh.upgrade(MyActor) after redefining MyActor")
        validate_actor_class(new_class, RESERVED_NAMES, ActorMesh)
        casting.check(self, "upgrade")
        with by_value(new_class.__module__):
            payload = encode(new_class)
        return upgrade_mesh(self, new_class, payload)

    def _set_class(self, actor_class: type) -> None:
        self._class = actor_class
        self._endpoints = endpoints_of(actor_class)
        for name in self._cache:
            del self.__dict__[name]
        self._cache = {}
        self._plan = None

    upgrade = _UpgradeAttribute()

    def stop(self, reason: str = "stopped by client") -> Future[None]:
        """Stop every actor gracefully: queued messages first, then `__cleanup__`."""
        if not self._owned:
            raise NotImplementedError(
                f"Cannot call stop on an ActorMeshRef ({self._name}): only the owner's mesh, the "
                "one spawn returned, can be stopped."
            )
        # Monarch's stop future resolves to an empty tuple (typed as None there too).
        def empty(_: Any) -> Any:
            return ()

        return Future.from_concurrent(self._stop_owned(reason), empty)

    def _stop_owned(self, reason: str) -> concurrent.futures.Future[Any]:
        if self._stopped is not None:
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()
            done.set_result(None)
            return done
        self._stopped = reason
        tree.stopping(self._key)
        return after(self._control_each_rank(StopActor(self._key, reason)), self._forget)

    def _control_each_rank(self, op: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        """Post control operation `op` to the proc of each rank of this view; done once every
        rank answered (an error answer fails it)."""
        cast = casting.plan(self)
        targets = [cast.proc_of(r) for r in range(len(cast.ranks))]
        entry = CountPort(len(targets))
        mailbox = get_runtime().mailbox
        reply = mailbox.open_port(entry, tuple(set(targets)))
        casting.post_control(self, control(op, reply))
        return entry.cf

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_actor_mesh,
            (self._class, self._name, self._key, self._proc_mesh, self._mesh_shape),
        )

    def __len__(self) -> int:
        return len(self._mesh_shape)

    def __repr__(self) -> str:
        # Monarch's text, character for character: str(shape) is `{hosts=2,gpus=2}`, the
        # parentheses are unbalanced there too, and `inner` names its Rust mesh class.
        return (
            f"ActorMesh(class={self._class}, shape={self._shape}), "
            "inner=<class 'monarch._rust_bindings.monarch_hyperactor.actor_mesh.PythonActorMesh'>)"
        )

    def rank_states(self) -> list[RankState]:
        """The state of each rank of this view (see `mesh.rank_state`): a rank whose proc died
        counts as failed, with the proc's exit report, even before the tree heard of it."""
        local = self._local_ranks()
        table = self._proc_mesh._table
        stopped = self._stopped
        if stopped is None and tree.status(self._key) is None and self._forgotten():
            stopped = ""  # stopped, and forgotten by the tree since: no reason known here
        return [actor_rank_state(table, self._key, local[g], g, stopped)
                for g in casting.plan(self).ranks]

    def _repr_html_(self) -> str:
        kind = f"ActorMesh of {self._class.__qualname__}"
        return mesh_html(kind, self._name, self.extent, self.rank_states())


def _rebuild_actor_mesh(
    actor_class: type, name: str, key: str, proc_mesh: ProcMesh, shape: Shape
) -> ActorMesh[Any]:
    return ActorMesh._create(actor_class, name, key, proc_mesh, shape, owned=False)


RESERVED_NAMES = frozenset(
    n for n in dir(ActorMesh) if not n.startswith("__") and n != "upgrade"
) | {"initialized", "stop", "slice", "flatten", "split", "rename", "size", "sizes", "extent"}

