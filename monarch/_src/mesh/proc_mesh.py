"""`ProcMesh`: OS processes laid out over named dimensions, and spawning actors on them.

A proc mesh's processes are recorded in a `_ProcTable` shared by the mesh and its slices: one
routing key per global rank, a pending key (`pending:<proc id>`) until the proc reported its
address, then the address. Messages sent before then are held by the mailbox in order and
released when the address is known, so `spawn_procs` and `spawn` never block.

A proc that dies (its exit status from the child watch or a served host, or a missed heartbeat)
is recorded in the table's `failed` (calls to a mesh or slice holding that rank then fail before
sending), marked dead in the mailbox, and reported to the owner of each actor mesh on it as "the
process this actor was running on failed: ...", named per actor (`actor_displays`). A proc that
exits before it reported ready fails at once the same way. With a `bootstrap`, failures read as
Monarch's setup actor's: a proc that died gives "Endpoint call setup.setup() failed, ..."
(`setup_report`), a bootstrap that raised the `ActorError` "Actor call setup.setup failed."
(`setup_errors`). Sending a `ProcMesh` to another actor pickles its table, which blocks until
every proc is up. Once its procs are gone this process forgets the mesh (`forget_table`, the
ownership tree, the traffic counters); stop futures resolve only after that.

Not done yet: proc deaths are recorded twice, in the table (which references in the owner's
process see too) and per actor mesh in the ownership tree; the tree could take `failed` over.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import uuid
import warnings
from typing import TYPE_CHECKING, Any, TypeVar

from monarch._src.config import get as config_get
from monarch._src.mesh import hooks, observe, traffic
from monarch._src.mesh.actor import validate_actor_class
from monarch._src.mesh.actor_mesh import RESERVED_NAMES, ActorMesh
from monarch._src.mesh.context import CreatorInfo, current_instance, instance_of, proc_meshes
from monarch._src.mesh.control_ops import GetProcMesh, Spawn, Supervise
from monarch._src.mesh.html import mesh_html
from monarch._src.mesh.native import NativeMesh, native_view, sliced_view
from monarch._src.mesh.ownership import after, owner_key, tree
from monarch._src.mesh.rank_state import RankState, proc_rank_state
from monarch._src.mesh.spawn_info import SpawnInfo, extent_of
from monarch._src.runtime import runtime as _runtime_module
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import copy_payload, decode, encode
from monarch._src.runtime.future import Future
from monarch._src.runtime.mailbox import is_pending
from monarch._src.runtime.ports import OncePort, decode_reply
from monarch._src.runtime.progress import Progress
from monarch._src.runtime.pytokio import Shared
from monarch._src.runtime.runtime import Runtime, get_runtime
from monarch._src.shape import MeshTrait, Point, Shape, Slice
from monarch._src.supervision.errors import SupervisionError, failure_report
from monarch._src.telemetry import record

if TYPE_CHECKING:
    from monarch._src.mesh.host_mesh import HostMesh

__all__ = [
    "ProcMesh",
    "ProcTable",
    "active_proc_meshes",
    "apply_log_mode",
    "check_log_mode",
    "fetch_proc_mesh",
    "flush_proc_logs",
    "forget_table",
    "log_manager_of",
    "mesh_id",
    "proc_table",
    "report_proc_failure",
    "root_of",
    "this_proc",
]

T = TypeVar("T")

# Monarch's setup actor, which runs a proc mesh's bootstrap: a proc that dies before it is
# ready fails under these names (its class path is Monarch's, as users see it there).
_SETUP_ACTOR = "monarch._src.actor.proc_mesh.SetupActor"
_SETUP_ENDPOINT = "setup.setup"

# Owned proc meshes of this process by id, so actors on them can fetch a reference.
_registry: dict[str, ProcMesh] = {}


class ProcTable:
    """The processes of one proc mesh, by global rank (owner side, shared with slices)."""

    def __init__(self, keys: list[str], pids: list[int | None] | None = None,
                 hosts: list[int] | None = None, watcher: str | None = None) -> None:
        self.keys = keys  # routing key per rank: "pending:<id>" until ready, then the address
        # Host index (within the host mesh) of each rank; None: all on one host. Casts to procs
        # on several hosts go through one relay proc per host (`relay.py`).
        self.hosts = hosts
        self.pids: list[int | None] = pids or [None] * len(keys)  # OS pid per rank, once known
        # The address of the process that watches these procs and reports how each ended (the
        # owner, which spawned them); None: this process. Set in the copies a table pickles.
        self.watcher = watcher
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.stopped: str | None = None  # why the procs were stopped, once they were
        self.failed: dict[int, str] = {}  # rank -> report, for procs that died
        self.name = "anon"  # the proc mesh's name, for failure reports
        self.owner_key: str | None = None  # actor key of the owner; None for the root client
        self.mesh_key = ""  # the proc mesh's key in the ownership tree
        # True when every host of these procs is this machine (set by the host agent): casts
        # then never go through the relay tree under `cast_tree="auto"` (`relay.hosts_of`).
        self.one_machine = False
        # Log forwarding (when enabled): write this mesh's procs' output here, and collapse
        # repeated lines within this many seconds (None: write each line as it comes).
        self.log_stream = True
        self.log_window: float | None = None
        # Proc ids by rank (host agents that know them) and the `tail_log_lines` in force when
        # the procs were spawned: how many of their last output lines a failure report shows.
        self.proc_ids: list[str] = []
        self.tail_lines = 0
        # Actor meshes spawned on these procs from this process, for failure reports:
        # (mesh key, mesh name, creator's actor key or None, global proc ranks in mesh order).
        self.actor_meshes: list[tuple[str, str, str | None, list[int]]] = []
        # Mesh key -> (display prefix "<creator>.<module.Class name", labels, sizes): how
        # failure reports name each actor of that mesh (Monarch's "The actor ... have failed").
        self.actor_displays: dict[str, tuple[str, tuple[str, ...], tuple[int, ...]]] = {}
        # Set by the host agent when the procs run a `bootstrap`, and by the owning ProcMesh
        # (the owner's display, the mesh's labels and sizes): a proc that dies before it is
        # ready then fails as Monarch's setup actor does ("Endpoint call setup.setup() failed,
        # The actor <root>.<...SetupActor setup{'gpus': 0/2}> ..."), see `report_proc_failure`.
        self.has_bootstrap = False
        self.owner_display = "<root>"
        self.extent: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self.setup_failed: set[int] = set()  # ranks whose proc died before it was ready
        # Rank -> encoded `ActorError` of a bootstrap that raised ("Actor call setup.setup
        # failed."): what `initialized` and calls to that rank raise, as in Monarch.
        self.setup_errors: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._progress: Progress | None = None  # procs coming up, once someone waits on them
        self._missing = sum(1 for k in keys if is_pending(k))
        if self._missing == 0:
            self.ready.set_result(None)

    def is_up(self, rank: int) -> bool:
        """Whether the proc of `rank` reported its address (its key is that address). A proc
        that failed since stays up here: `failed` says that."""
        return not is_pending(self.keys[rank])

    def resolve(self, rank: int, addr: str, pid: int) -> None:
        with self._lock:
            if self.is_up(rank):
                return
            self.keys[rank] = addr
            self.pids[rank] = pid
            self._missing -= 1
            done = self._missing == 0
            up, progress = len(self.keys) - self._missing, self._progress
        if progress is not None and not done:
            progress.update(up)
        elif progress is not None:  # its last line before anyone waiting on `ready` goes on
            progress.close(detail="ready")
        if done and not self.ready.done():
            self.ready.set_result(None)

    def report_progress(self) -> None:
        """Report the procs coming up ("procs up: 1/4") until they all are or one failed: a
        `Progress`, shown per the `progress` config key. Once per table; nothing if they are
        up already."""
        if self._progress is not None or self.ready.done():  # the fast path takes no lock
            return
        with self._lock:
            if self.ready.done() or self._progress is not None:
                return
            progress = self._progress = Progress("procs up", len(self.keys))
            progress.update(len(self.keys) - self._missing)
        # Closed by `resolve` / `fail` before they complete `ready`; this covers one that
        # completed it between the check above and now (closing twice does nothing).
        self.ready.add_done_callback(lambda f: progress.close(f.exception(), detail="ready"))

    def begin_stop(self, reason: str) -> None:
        """Mark these procs as being stopped (the first reason stays) and their meshes as
        stopping in the ownership tree: stopped is not failed, so procs exiting from here on
        are no one's fault."""
        if self.stopped is None:
            self.stopped = reason
            tree.stopping(self.mesh_key)
            for mesh_key, *_ in self.actor_meshes:
                tree.stopping(mesh_key)

    def forget_actor_mesh(self, key: str) -> str | None:
        """Drop the actor mesh `key` from `actor_meshes` and `actor_displays` (it was stopped
        and its actors answered); returns its creator's actor key (None: the root client)."""
        self.actor_displays.pop(key, None)
        for entry in list(self.actor_meshes):
            if entry[0] == key:
                self.actor_meshes.remove(entry)
                return entry[2]
        return None

    def forget_when_stopped(
        self, stop: concurrent.futures.Future[None]
    ) -> concurrent.futures.Future[None]:
        """`stop` (the stop of these procs, which a host agent runs), done once this process
        also forgot what it keeps per mesh about them (`forget_table`)."""
        return after(stop, lambda: forget_table(self))

    def fail(self, rank: int, report: str) -> None:
        self.failed[rank] = report
        if not self.ready.done():
            error = self.error(rank, report)
            if self._progress is not None:
                self._progress.close(error)
            self.ready.set_exception(error)

    def error(self, rank: int, report: str, endpoint: str | None = None) -> Exception:
        """The error a call reaching failed rank `rank` gets (a death during setup names the
        setup actor's endpoint, as in Monarch, whatever endpoint was called)."""
        if rank in self.setup_failed:
            return SupervisionError(report, _SETUP_ENDPOINT)
        payload = self.setup_errors.get(rank)
        if payload is not None:
            return decode(payload)  # type: ignore[no-any-return]
        return SupervisionError(report, endpoint)

    def setup_report(self, rank: int, report: str) -> str | None:
        """`report` as the failure of Monarch's setup actor on rank `rank`, for a proc that
        ran a bootstrap and died before it was ready; None otherwise."""
        if not self.has_bootstrap or self.extent is None or rank in self.failed:
            return None
        if self.is_up(rank):
            return None
        point = Point(rank, extent_of(*self.extent))
        return failure_report(f"{self.owner_display}.<{_SETUP_ACTOR} setup{point!r}>", report)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sending a table waits until every proc is up, so the copy holds only addresses.
        self.ready.result()
        watcher = self.watcher or get_runtime().address
        return (ProcTable, (list(self.keys), list(self.pids), self.hosts, watcher))


def report_proc_failure(rt: Any, table: ProcTable, rank: int, report: str) -> None:
    """Rank `rank` of `table` failed (on the runtime loop of the table's owner process): record
    it, tell the owners, and fail what waits on the proc.

    Each actor mesh with an actor on that proc is a failed mesh, and its owner is told; with no
    actor there, the proc mesh's owner is told about the proc mesh.
    """
    setup = table.setup_report(rank, report)
    if setup is not None:
        # Monarch runs the bootstrap in a setup actor that every call and spawn waits for: its
        # failure is what they all get, and what the proc mesh's owner is told.
        table.setup_failed.add(rank)
        table.fail(rank, setup)
        rt.mailbox.post(rt.address, control(
            Supervise(table.owner_key, table.name, table.mesh_key, rank, setup)))
        rt.mailbox.proc_failed(table.keys[rank], table.error(rank, setup))
        return
    table.fail(rank, report)

    def supervise(owner: str | None, mesh_name: str, mesh_key: str, mesh_rank: int,
                  text: str) -> None:
        rt.mailbox.post(rt.address, control(
            Supervise(owner, mesh_name, mesh_key, mesh_rank, text)))

    told = False
    for mesh_key, name, creator_key, ranks in table.actor_meshes:
        if rank in ranks:
            mesh_rank = ranks.index(rank)
            supervise(creator_key, name, mesh_key, mesh_rank,
                      _actor_report(table, mesh_key, mesh_rank, report))
            told = True
    if not told:
        supervise(table.owner_key, table.name, table.mesh_key, rank, report)
    rt.mailbox.proc_failed(table.keys[rank], SupervisionError(report))


def forget_table(table: ProcTable) -> None:
    """The procs of `table` are gone: drop this process's per-mesh records of its proc mesh and
    of the actor meshes spawned on it (the owner's registry, the ownership tree, the message
    counters, the owners' `owned_meshes`), so a process that spawns and stops meshes for a
    long time does not grow. Nothing can report about those meshes any more (their procs
    answered the stop, in order after anything they sent); calls to them are refused by the
    table's `stopped`."""
    _registry.pop(table.mesh_key, None)
    tree.forget(table.mesh_key)
    owners = {table.owner_key}
    for key, _name, creator_key, ranks in table.actor_meshes:
        tree.forget(key)
        traffic.forget(key, len(ranks))
        owners.add(creator_key)
    for owner in owners:
        inst = instance_of(owner)
        if inst is None:
            continue
        owned = inst.owned_meshes
        for mesh in [m for m in list(owned) if _table_of(m) is table]:
            try:
                owned.remove(mesh)  # one by one: the owner may be appending meanwhile
            except ValueError:
                pass  # removed by the owner meanwhile: what we wanted


def _table_of(mesh: Any) -> ProcTable | None:
    if isinstance(mesh, ProcMesh):
        return mesh._table
    if isinstance(mesh, ActorMesh):
        return mesh._proc_mesh._table
    return None


def _actor_report(table: ProcTable, mesh_key: str, mesh_rank: int, report: str) -> str:
    """A proc's failure as the report of one actor on it, in Monarch's words."""
    display = table.actor_displays.get(mesh_key)
    if display is None:
        return report
    prefix, labels, sizes = display
    point = Point(mesh_rank, extent_of(labels, sizes))
    return failure_report(f"{prefix}{point!r}>", report)


class ProcMesh(MeshTrait):
    """A mesh of OS processes; `spawn` places one actor on each."""

    _table: ProcTable  # shared by the mesh, its slices and the owner's unpickled copies
    _mesh_shape: Shape  # over the table's global ranks
    _host: HostMesh | None  # the host mesh it was spawned from (None for references)
    _name: str
    _owned: bool  # only the owned mesh may be stopped
    _id: str  # shared by slices and references: the key of the owner's registry
    _owner_addr: str  # the owner's process, which serves references (`fetch_proc_mesh`)
    # torchmonarch's handle on the Rust-side mesh (`_proc_mesh`), once read or set; None: the
    # default view, resolving when the table is ready. Pickling waits for it; spawn does not.
    _native: Shared[NativeMesh] | None
    _log_manager: Any  # torchmonarch's LoggingManager of this mesh, once asked for; else None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "ProcMesh cannot be constructed directly. Use this_host().spawn_procs(...) or "
            "this_proc()."
        )

    @classmethod
    def _create(
        cls,
        table: ProcTable,
        shape: Shape,
        *,
        host: HostMesh | None,
        name: str,
        owned: bool,
        mesh_id: str | None = None,
        owner_addr: str | None = None,
    ) -> ProcMesh:
        pm = object.__new__(cls)
        pm._table = table
        pm._mesh_shape = shape
        pm._host = host
        pm._name = name
        pm._owned = owned
        pm._id = mesh_id or f"{name}-{uuid.uuid4().hex[:8]}"
        pm._owner_addr = owner_addr or get_runtime().address
        pm._native = None
        pm._log_manager = None
        if owned:
            _registry[pm._id] = pm
            if table.extent is None:
                table.extent = (tuple(shape.labels), tuple(shape.ndslice.sizes))
                table.owner_display = str(current_instance())
        return pm

    # ---- mesh protocol ----------------------------------------------------------------------
    @property
    def _shape(self) -> Shape:
        return self._mesh_shape

    def _new_with_shape(self, shape: Shape) -> ProcMesh:
        pm = ProcMesh._create(
            self._table, shape, host=self._host, name=self._name, owned=False,
            mesh_id=self._id, owner_addr=self._owner_addr,
        )
        whole = self._native
        if whole is not None:
            # A view someone set (or read): the slice's is it, sliced, at once if it resolved,
            # else once it does (Monarch's pending path). Unset, the slice's default view is
            # the same thing, made on first use.
            pm._native = sliced_view(whole, shape.region)
        return pm

    def _check_usable(self, mesh_name: str, endpoint: str, ranks: list[int]) -> None:
        """Raise if the procs at global `ranks` were stopped or died."""
        table = self._table
        if table.stopped is not None:
            raise SupervisionError(
                f"actor mesh {mesh_name} is stopped due to proc mesh shutdown ({table.stopped})",
                f"{mesh_name}.{endpoint}",
            )
        if table.failed:
            for rank in ranks:
                report = table.failed.get(rank)
                if report is not None:
                    raise table.error(rank, report, f"{mesh_name}.{endpoint}")

    # ---- spawning ---------------------------------------------------------------------------
    def spawn(self, name: str, Class: type[T], *args: Any, **kwargs: Any) -> T:
        """Spawn one `Class(*args, **kwargs)` actor per proc of this mesh; never blocks."""
        if not isinstance(name, str):
            # torchmonarch's words for a name that is not a string.
            raise TypeError(
                f"argument 'mesh_base_name': '{type(name).__name__}' object cannot be cast as "
                "'str'"
            )
        if self._table.stopped is not None:
            raise RuntimeError("`ProcMesh` has already been stopped")
        substitute = hooks.actor_class.get()
        if substitute is not None:  # an actor mock (monarch._src.actor.mock.patch_actor)
            Class = substitute(Class)
        validate_actor_class(Class, RESERVED_NAMES, ActorMesh, args, kwargs)
        # Held until the procs are up: copy large buffers so later changes do not leak in.
        payload = copy_payload(encode((Class, args, kwargs)))
        key = f"{name}-{uuid.uuid4().hex[:10]}"
        me = current_instance()
        rt = get_runtime()
        creator = CreatorInfo(me.name, str(me), rt.address, me.actor_key)
        shape = self._mesh_shape
        labels = tuple(shape.labels)
        sizes = tuple(shape.ndslice.sizes)
        keys = self._table.keys
        for i, rank in enumerate(shape.ranks()):
            info = SpawnInfo(key, name, i, labels, sizes, creator, (self._owner_addr, self._id))
            rt.mailbox.post(keys[rank], control(Spawn(info, payload)))
        if record.SINK is not None:
            observe.actor_mesh_spawned(key, name, Class, self)
        mesh = ActorMesh._create(Class, name, key, self, shape, owned=True)
        me.owned_meshes.append(mesh)
        tree.add(key, name, owner_key(me.actor_key), len(shape), actors=True)
        self._table.actor_meshes.append((key, name, me.actor_key, shape.ranks()))
        self._table.actor_displays[key] = (
            f"{me}.<{Class.__module__}.{Class.__qualname__} {name}", labels, sizes)
        return mesh  # type: ignore[return-value]

    # ---- lifecycle --------------------------------------------------------------------------
    @property
    def initialized(self) -> Future[bool]:
        """Resolves to True once every proc is up. Procs still coming up are reported
        ("procs up: 1/4", `ProcTable.report_progress`) while someone waits on this."""
        self._table.report_progress()
        return Future.from_concurrent(self._table.ready, lambda _: True)

    @property
    def _proc_mesh(self) -> Shared[NativeMesh]:
        """torchmonarch's handle on the mesh's Rust side: resolves to its `NativeMesh` (the
        region) once every proc is up (`mesh/native.py`). Settable, as on Monarch: pickling the
        mesh waits for whatever it holds; spawning actors does not."""
        if self._native is None:
            self._native = native_view(self, self._table.ready)
        return self._native

    @_proc_mesh.setter
    def _proc_mesh(self, native: Shared[NativeMesh]) -> None:
        self._native = native

    @property
    def _labels(self) -> list[str]:
        """The dimension names, as a list (torchmonarch's ProcMesh gives a list where its
        HostMesh gives a tuple)."""
        return list(self._shape.labels)

    @property
    def _host_mesh(self) -> HostMesh | None:
        """The host mesh `spawn_procs` was called on (None for a mesh received from elsewhere)."""
        return self._host

    def stop(self, reason: str = "stopped by client") -> Future[None]:
        """Stop every actor and proc of this mesh. Only the owner's mesh can be stopped."""
        if not self._owned:
            raise ValueError("ProcMesh is not owned; must be stopped by an owner")
        return Future.from_concurrent(self._stop_owned(reason))

    def _stop_owned(self, reason: str) -> concurrent.futures.Future[None]:
        if self._host is None:
            raise ValueError("ProcMesh is not owned; must be stopped by an owner")
        return self._host._agent.stop_procs(self._table, reason)

    async def __aenter__(self) -> ProcMesh:
        if self._table.stopped is not None:
            raise RuntimeError("`ProcMesh` has already been stopped")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._table.stopped is None:
            await self.stop()

    @property
    def host_mesh(self) -> HostMesh:
        """The host of a one-proc mesh; `NotImplementedError` for a mesh of several procs."""
        if len(self) != 1:
            raise NotImplementedError(
                f"host_mesh is only defined for a singleton proc mesh; {self._name} has "
                f"{len(self)} procs. Slice it to one proc first."
            )
        if self._host is None:
            from monarch._src.mesh.host_mesh import current_host

            return current_host()
        return self._host

    async def logging_option(
        self,
        stream_to_client: bool = False,
        aggregate_window_sec: float | None = None,
        level: int = logging.INFO,
    ) -> None:
        """Whether this mesh's procs' stdout/stderr reach this process, how repeated lines are
        collapsed (`aggregate_window_sec`), and the Python logging level in the procs."""
        check_log_mode(self, stream_to_client, aggregate_window_sec, level, stacklevel=3)
        if hooks.logging_manager.get() is not None:
            # Through torchmonarch's log manager, as there: code that patches it sees the call,
            # and in IPython it flushes every mesh's output after each cell.
            await self._logging_manager.logging_option(
                stream_to_client=stream_to_client, aggregate_window_sec=aggregate_window_sec,
                level=level)
        else:
            await apply_log_mode(self, stream_to_client, aggregate_window_sec, level)

    @property
    def _logging_manager(self) -> Any:
        """torchmonarch's per-mesh log client (`monarch._src.actor.logging.LoggingManager`),
        made on first use by the `logging_manager` hook slot; the owned mesh's drives this
        mesh's forwarding (`set_log_mode`, `flush_proc_logs`), a slice's or a reference's has no
        client (its flushes do nothing)."""
        if self._log_manager is None:
            self._log_manager = hooks.logging_manager.require()(self)
        return self._log_manager

    def __reduce__(self) -> tuple[Any, ...]:
        # A sent mesh names procs that are up: wait for the mesh's native view (by default, the
        # table's readiness, which the table's own pickling waits for too).
        if self._native is not None:
            self._native.block_on()
        return (_rebuild_proc_mesh, (self._table, self._mesh_shape, self._name, self._id,
                                     self._owner_addr))

    def __repr__(self) -> str:
        # Monarch's default object repr, under its module path (no name or extent in it).
        return f"<monarch._src.actor.proc_mesh.ProcMesh object at {id(self):#x}>"

    def rank_states(self) -> list[RankState]:
        """The state of each rank of this view (see `mesh.rank_state`)."""
        table = self._table
        return [proc_rank_state(table, g) for g in self._mesh_shape.ranks()]

    def _repr_html_(self) -> str:
        return mesh_html("ProcMesh", self._name, self.extent, self.rank_states())

    # ---- tensor engine (monarch._src.tensor) ---------------------------------------------
    def _device_mesh(self) -> Any:
        override = hooks.device_mesh_override.get()
        if override is not None:  # a tensor engine mock for the calling actor's class
            mocked = override(self)
            if mocked is not None:
                return mocked
        engine = hooks.mesh_engine.require()(self)
        return engine.root_mesh._new_with_shape(self._mesh_shape)

    def activate(self) -> Any:
        """Context manager: torch operations inside it run on every proc of this mesh."""
        return self._device_mesh().activate()

    def rank_tensor(self, dim: str | tuple[str, ...]) -> Any:
        """A distributed tensor holding each proc's coordinate along `dim`."""
        return self._device_mesh().rank(dim)

    def rank_tensors(self) -> dict[str, Any]:
        """Dimension -> `rank_tensor(dimension)`."""
        ranks: dict[str, Any] = self._device_mesh().ranks
        return ranks

    def to_table(self) -> str:
        """A text table of every point's coordinates and its proc's engine rank."""
        table: str = self._device_mesh().to_table()
        return table


def _rebuild_proc_mesh(
    table: ProcTable, shape: Shape, name: str, mesh_id: str, owner_addr: str
) -> ProcMesh:
    return ProcMesh._create(table, shape, host=None, name=name, owned=False, mesh_id=mesh_id,
                            owner_addr=owner_addr)


def check_log_mode(pm: ProcMesh, stream_to_client: bool, aggregate_window_sec: float | None,
                   level: int, stacklevel: int = 3, warn: bool = True) -> None:
    """Refuse log options `apply_log_mode` cannot honour on `pm`, naming the bad one; warn
    when streaming is asked for while log forwarding is off (`stacklevel` as `warnings.warn`
    takes it here: 3 names the caller of this function's caller)."""
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 255:
        raise ValueError(f"logging_option level must be an int from 0 to 255, not {level!r}.")
    if aggregate_window_sec is not None and not stream_to_client:
        raise ValueError(
            "logging_option: an aggregate_window_sec needs stream_to_client=True (there is "
            "nothing to aggregate when nothing is streamed)."
        )
    if aggregate_window_sec is not None and aggregate_window_sec <= 0:
        raise ValueError(
            f"logging_option aggregate_window_sec must be positive, not {aggregate_window_sec}."
        )
    if warn and stream_to_client and not config_get("enable_log_forwarding"):
        warnings.warn(
            "logging_option(stream_to_client=True) has no effect: log forwarding is off, and "
            "procs write to this process's terminal directly. Set enable_log_forwarding "
            "before spawning procs to forward their output.",
            UserWarning,
            stacklevel=stacklevel,
        )
    if not pm._owned or pm._host is None:
        raise ValueError(
            "logging_option is set by the proc mesh's owner: call it on the mesh that "
            "spawn_procs returned, not on a slice or a received reference."
        )


async def apply_log_mode(pm: ProcMesh, stream_to_client: bool,
                         aggregate_window_sec: float | None, level: int) -> None:
    """Set the log options of `pm` (owned, checked by `check_log_mode`) once its procs are up:
    what they printed before is written under the old options first."""
    host = pm._host
    assert host is not None  # check_log_mode refused a mesh without one
    table = pm._table
    await asyncio.wrap_future(table.ready)
    if config_get("enable_log_forwarding"):
        await asyncio.wrap_future(host._agent.flush_logs([table]))
    table.log_stream = stream_to_client
    table.log_window = aggregate_window_sec
    await asyncio.wrap_future(host._agent.set_log_level(table, level))


def log_manager_of(pm: ProcMesh) -> Any:
    """`pm._logging_manager`: torchmonarch's log manager of a proc mesh."""
    return pm._logging_manager


def flush_proc_logs(pm: ProcMesh) -> concurrent.futures.Future[None]:
    """Completes once every line `pm`'s procs wrote so far reached this process's output (a
    done future for a mesh this process does not own, whose output goes to its owner)."""
    if not pm._owned or pm._host is None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done
    return pm._host._agent.flush_logs([pm._table])


def active_proc_meshes() -> list[ProcMesh]:
    """The proc meshes this process spawned and has not stopped, in spawn order."""
    return [pm for pm in list(_registry.values())
            if pm._owned and pm._host is not None and pm._table.stopped is None]


def proc_table(proc_mesh: ProcMesh) -> ProcTable:
    """The process table of `proc_mesh` (shared by the mesh, its slices and, in the owner's
    process, its unpickled copies): the identity of "the same procs"."""
    return proc_mesh._table


def mesh_id(proc_mesh: ProcMesh) -> str:
    """The id of `proc_mesh`, shared by its slices and references."""
    return proc_mesh._id


def root_of(proc_mesh: ProcMesh) -> ProcMesh:
    """The owned mesh `proc_mesh` is a view of, when this process owns it; else `proc_mesh`."""
    return _registry.get(proc_mesh._id, proc_mesh)


_this_proc: ProcMesh | None = None


def this_proc() -> ProcMesh:
    """The singleton proc mesh of the current process; actors spawned on it run here."""
    global _this_proc
    if _this_proc is None:
        rt = get_runtime()
        table = ProcTable([rt.address])
        _this_proc = ProcMesh._create(
            table, Shape([], Slice(offset=0, sizes=[], strides=[])), host=None, name="this_proc",
            owned=False,
        )
        # Served to this process's own actors as any proc mesh (`context().actor_instance.
        # proc_mesh` of a controller running here), though nobody owns it to stop it.
        _registry[_this_proc._id] = _this_proc
    return _this_proc


def fetch_proc_mesh(ref: tuple[str, str]) -> ProcMesh:
    """Ask the owner at `ref[0]` for the proc mesh `ref[1]` (blocks; from an actor thread)."""
    addr, mesh_id = ref
    pm = _registry.get(mesh_id)
    if pm is not None:
        return pm._new_with_shape(pm._mesh_shape)
    entry = OncePort()
    rt = get_runtime()
    reply = rt.mailbox.open_port(entry, (addr,))
    rt.mailbox.post(addr, control(GetProcMesh(mesh_id), reply))
    return decode_reply(entry.cf.result(timeout=60))  # type: ignore[no-any-return]


def _proc_mesh_of(ref: tuple[str, str] | None) -> ProcMesh:
    """What an actor's context asks for (`context.proc_meshes`): the proc mesh `ref` names, or
    this process's own."""
    return this_proc() if ref is None else fetch_proc_mesh(ref)


proc_meshes.install(_proc_mesh_of)


def serve_proc_mesh(mesh_id: str) -> ProcMesh:
    pm = _registry.get(mesh_id)
    if pm is None:
        raise LookupError(f"proc mesh {mesh_id} is not known here; it may have been stopped.")
    return pm._new_with_shape(pm._mesh_shape)


def _serve_proc_meshes(rt: Runtime) -> None:
    """Answer `GetProcMesh` (another process's `fetch_proc_mesh`) in every runtime, once the
    mesh asked for is up."""
    mailbox = rt.mailbox

    def get_proc_mesh(peer: str, op: GetProcMesh, reply: Any) -> None:
        pm = serve_proc_mesh(op.mesh_id)

        def answer(_: Any) -> None:
            mailbox.reply(reply, pm)

        pm._table.ready.add_done_callback(
            lambda f: mailbox.loop.call_soon_threadsafe(answer, f)
        )

    mailbox.control.register(GetProcMesh, get_proc_mesh)


_runtime_module.install_on_start(_serve_proc_meshes)
