"""The ambient context: which actor is running, and where the current message was cast.

Each actor runs on its own thread, so the running actor is thread-local; the position of the
current message within its cast is a context variable, so `@concurrent_endpoint` tasks keep the
rank of the message that started them. Outside any actor (the script, a notebook cell, any thread
of the controller) the context is the root client's, created once per process.

An instance's `proc_mesh` and `proc` are caller-side handles, which this shared module may not
import: `proc_mesh.py` installs how to get them in the `proc_meshes` slot when it loads (the
mesh package imports it, so the slot is filled wherever an actor can run).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import TYPE_CHECKING, Any, Protocol

from monarch._src.mesh.hooks import Slot
from monarch._src.shape import Extent, Point

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh

__all__ = [
    "ActorId",
    "Context",
    "Instance",
    "binding_instance",
    "check_cancelled",
    "context",
    "current_actor_name",
    "current_hosted",
    "current_rank",
    "current_size",
]

_EMPTY_EXTENT = Extent([], [])
_tls = threading.local()
_message_rank: contextvars.ContextVar[Point | None] = contextvars.ContextVar(
    "monarch_message_rank", default=None
)
_root_lock = threading.Lock()
_root: Instance | None = None


class ProcMeshLookup(Protocol):
    """`lookup(ref)`: the proc mesh `ref` (`(owner address, mesh id)`) names, asked of its owner
    (blocks: from an actor thread), or, for None, this process's own (`this_proc()`)."""

    def __call__(self, ref: tuple[str, str] | None, /) -> ProcMesh: ...


proc_meshes: Slot[ProcMeshLookup] = Slot(
    "proc_meshes",
    "How an actor's context gets proc mesh handles (installed by mesh/proc_mesh.py).",
    "context().actor_instance.proc_mesh needs monarch._src.mesh.proc_mesh: import monarch.actor",
)


class CreatorInfo:
    """A serializable description of who spawned an actor."""

    __slots__ = ("actor_key", "address", "display", "name")

    def __init__(self, name: str, display: str, address: str, actor_key: str | None) -> None:
        self.name = name  # the spawner's spawn name ("root" for the client)
        self.display = display  # the spawner's display string, e.g. "<root>"
        self.address = address  # the spawner's proc address
        self.actor_key = actor_key  # the spawner's actor key; None for the root client

    def __reduce__(self) -> tuple[Any, ...]:
        return (CreatorInfo, (self.name, self.display, self.address, self.actor_key))

    def __repr__(self) -> str:
        return self.display  # torchmonarch shows the creator's actor name, e.g. `<root>`


class ActorId(str):
    """An actor's id as `Instance.actor_id` gives it: its display name (this string) and
    `actor_name`, the spawn name of its actor mesh (torchmonarch's `ActorAddr.actor_name`)."""

    actor_name: str

    def __new__(cls, display: str, actor_name: str) -> ActorId:
        self = super().__new__(cls, display)
        self.actor_name = actor_name
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (ActorId, (str(self), self.actor_name))


class Instance:
    """The running actor, as seen from inside it (`context().actor_instance`)."""

    def __init__(
        self,
        *,
        name: str,
        class_name: str,
        rank: Point,
        creator: CreatorInfo | None,
        actor_key: str | None,
        proc_id: str,
        display: str,
        host: Any = None,
    ) -> None:
        self.name = name  # spawn name of the actor mesh ("root" for the client)
        self.class_name = class_name  # "module.Qualname" of the actor class
        self.rank = rank  # this actor's position in the mesh it was spawned as
        self.creator = creator  # who spawned this actor; None for the root client
        self.actor_key = actor_key  # key of the actor in its proc's mailbox; None for root
        self.proc_id = proc_id  # this process's id
        self._display = display
        self._host = host  # the hosted actor behind this instance (None for the root client)
        self._proc_mesh: ProcMesh | None = None  # filled in lazily
        self.owned_meshes: list[Any] = []  # meshes this actor spawned and owns, in spawn order

    def _as_rust(self) -> Instance:
        """torchmonarch's binding-side instance, which its low-level APIs take (`Port`, the
        log client): there is no Rust side here, so the instance itself."""
        return self

    @property
    def actor_id(self) -> ActorId:
        """This actor's display name (a string), with torchmonarch's `actor_name`: the name its
        mesh was spawned under."""
        return ActorId(self._display, self.name)

    @property
    def _children(self) -> list[Any] | None:
        """torchmonarch's name for the meshes this actor spawned and still owns (a copy of
        `owned_meshes`, None when there are none): its test fixtures read it to stop the proc
        meshes a test left behind, and assign what they keep."""
        return list(self.owned_meshes) or None

    @_children.setter
    def _children(self, meshes: list[Any] | None) -> None:
        self.owned_meshes[:] = meshes or []

    @property
    def proc_mesh(self) -> ProcMesh:
        """The proc mesh this actor was spawned on."""
        if self._proc_mesh is None:
            ref = None if self._host is None else self._host.info.proc_mesh_ref
            self._proc_mesh = proc_meshes.require()(ref)
        return self._proc_mesh

    @property
    def proc(self) -> ProcMesh:
        """The singleton proc mesh of the process this actor lives in."""
        return proc_meshes.require()(None)

    def abort(self, reason: str | None = None) -> None:
        """Fail this actor now; its owner is told, with `reason`."""
        if self._host is None:
            raise RuntimeError("The root client cannot abort itself; raise an exception instead.")
        self._host.abort(reason or "(no reason provided)")

    def stop(self, reason: str | None = None) -> None:
        """Stop this actor gracefully once the current message is handled."""
        if self._host is None:
            raise RuntimeError("The root client cannot stop itself; call shutdown_context().")
        self._host.request_stop(reason or "stopped by itself")

    def kill(self, reason: str | None = None) -> None:
        """Stop this actor at once, without cleanup."""
        self.abort(reason or "killed")

    def __str__(self) -> str:
        return self._display

    def __repr__(self) -> str:
        return self._display


class Context:
    """What `context()` returns: the running actor and the current message's rank."""

    __slots__ = ("actor_instance",)

    def __init__(self, instance: Instance) -> None:
        self.actor_instance = instance

    def __repr__(self) -> str:
        # torchmonarch keeps object's repr; its Context class lives at this path there.
        return f"<monarch._src.actor.actor_mesh.Context object at {id(self):#x}>"

    @property
    def cancelled(self) -> bool:
        """Whether the caller of the message being handled cancelled it (`Future.cancel`, or an
        interrupt while it waited): a long sync endpoint checks it and stops early."""
        host = self.actor_instance._host
        return host is not None and bool(host.cancelled())

    @property
    def message_rank(self) -> Point:
        """The rank the current message was addressed to (the actor's own rank outside a cast)."""
        rank = _message_rank.get()
        if rank is None:
            return self.actor_instance.rank
        return rank


def _root_instance() -> Instance:
    global _root
    if _root is None:
        with _root_lock:
            if _root is None:
                from monarch._src.runtime.runtime import get_runtime

                rt = get_runtime()
                _root = Instance(
                    name="root",
                    class_name="monarch.RootClientActor",
                    rank=Point(0, _EMPTY_EXTENT),
                    creator=None,
                    actor_key=None,
                    proc_id=rt.proc_id,
                    display="<root>",
                )
    return _root


def current_instance() -> Instance:
    inst: Instance | None = getattr(_tls, "instance", None)
    return inst if inst is not None else _root_instance()


def instance_of(actor_key: str | None) -> Instance | None:
    """The instance of the actor `actor_key` in this process (the root client's for None), or
    None when it is not here (any more)."""
    if actor_key is None:
        return _root
    from monarch._src.runtime.runtime import runtime_if_started

    rt = runtime_if_started()
    inst = getattr(None if rt is None else rt.mailbox.actors.get(actor_key), "instance", None)
    return inst if isinstance(inst, Instance) else None


def current_hosted() -> Any:
    """The hosted actor (`mesh.hosted.HostedActor`) running on the calling thread; None outside
    actor threads (the client, any thread of a proc that runs no actor)."""
    inst: Instance | None = getattr(_tls, "instance", None)
    return None if inst is None else inst._host


def set_thread_instance(instance: Instance) -> None:
    """Bind `instance` to the calling (actor) thread."""
    _tls.instance = instance


def set_message_rank(rank: Point | None) -> contextvars.Token[Point | None]:
    return _message_rank.set(rank)


class ClientContext:
    """The root client's `Context` (torchmonarch's `_client_context`): `get()` makes it on first
    use (which starts the runtime); `try_get()` never starts anything. `context()` outside any
    actor asks it, so there is one place the client's context comes from."""

    def get(self) -> Context:
        return Context(_root_instance())

    def try_get(self) -> Context | None:
        from monarch._src.runtime.runtime import runtime_if_started

        return self.get() if runtime_if_started() is not None else None

    @property
    def _val(self) -> Context | None:
        """The root client's context if this process has made it, else None (torchmonarch's
        cell): a proc's actors never make it, whatever they receive."""
        return None if _root is None else Context(_root)


client_context = ClientContext()


def binding_instance(instance: Any) -> Any:
    """What torchmonarch's low-level APIs take for `instance`: its `_as_rust()` (the instance
    itself here, or whatever a test's stand-in returns)."""
    return instance._as_rust()


def context() -> Context:
    """The running actor's context, or the root client's outside any actor."""
    inst: Instance | None = getattr(_tls, "instance", None)
    return Context(inst) if inst is not None else client_context.get()


def check_cancelled() -> None:
    """Raise `asyncio.CancelledError` if the caller of the message being handled cancelled it;
    the actor then goes on with its next message (nothing is sent back)."""
    if context().cancelled:
        raise asyncio.CancelledError("the caller cancelled this call")


def current_rank() -> Point:
    """The position of the running actor within the current message's cast."""
    return context().message_rank


def current_size() -> dict[str, int]:
    """The sizes of the current message's cast extent."""
    rank = current_rank()
    return dict(zip(rank.extent.labels, rank.extent.sizes))


def current_actor_name() -> str:
    """A name unique to the running actor (distinct per rank)."""
    return str(current_instance().actor_id)

