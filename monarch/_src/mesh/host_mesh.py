"""`HostMesh`: machines that can start procs.

A host mesh delegates the work to a `HostAgent` (`mesh/host_agent.py`) from the hosts layer: the
embedded local host (`this_host()`, a fork server on this machine) or hosts attached from a
cluster. This layer reaches the hosts layer and the features only through hook slots
(`mesh/hooks.py`): `local_host` for `this_host()`'s agent, `workspace_sync` for `sync_workspace`.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import socket
import weakref
from collections.abc import Callable
from typing import Any

from monarch._src.mesh import hooks, observe
from monarch._src.mesh.context import current_instance
from monarch._src.mesh.host_agent import HostAgent, PlacedTable
from monarch._src.mesh.native import NativeMesh, native_view, sliced_view
from monarch._src.mesh.ownership import owner_key, tree
from monarch._src.mesh.proc_mesh import ProcMesh, ProcTable, mesh_id
from monarch._src.runtime.future import Future
from monarch._src.runtime.pytokio import Shared
from monarch._src.shape import MeshTrait, Point, Region, Shape, Slice
from monarch._src.telemetry import record

__all__ = ["HostMesh", "StartupThenBootstrap", "current_host"]


class StartupThenBootstrap:
    """A proc's bootstrap that first runs the `proc_startup` hook's callables (each
    `() -> None`), then the user's bootstrap, if any (whose result it returns: a coroutine is
    run by the proc). Pickled into the proc's spec, as any bootstrap."""

    def __init__(self, startup: tuple[Callable[[], None], ...],
                 bootstrap: Callable[[], Any] | None) -> None:
        self.startup = startup
        self.bootstrap = bootstrap

    def __call__(self) -> Any:
        for fn in self.startup:
            fn()
        return None if self.bootstrap is None else self.bootstrap()


# Called with every proc mesh `spawn_procs` makes, in registration order, before it is
# returned (torchmonarch's `register_proc_mesh_spawn_callback`: monitoring, telemetry).
PROC_MESH_SPAWN_CALLBACKS: list[Callable[[ProcMesh], None]] = []


class HostMesh(MeshTrait):
    """A mesh of hosts. `spawn_procs` starts procs on each; `this_host()` is this machine."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "HostMesh cannot be constructed directly. Use this_host() or hosts_from_config()."
        )

    _agent: HostAgent
    _mesh_shape: Shape
    _owned: bool
    _state: _HostState
    _python: str | None
    _workspace_ok: bool
    # torchmonarch's handle on the Rust-side mesh: resolves to the NativeMesh (the region) once
    # the hosts are connected; None once shutdown() was called on this mesh.
    _inner_host_mesh: Shared[NativeMesh] | None

    @classmethod
    def from_agent(cls, agent: HostAgent, shape: Shape, owned: bool,
                   workspace: bool | None = None) -> HostMesh:
        """The host mesh of `shape` whose hosts `agent` runs (what the hosts layer builds:
        `this_host()`, `attach_to_workers`). `owned`: this process may stop and shut it down.
        `workspace`: whether `sync_workspace` may sync to it (default: `owned`)."""
        hm = object.__new__(cls)
        hm._agent = agent
        hm._mesh_shape = shape
        hm._owned = owned
        hm._state = _HostState()
        hm._python = None  # interpreter the procs run (None: the host's own)
        # sync_workspace is for the mesh as attached, not slices
        hm._workspace_ok = owned if workspace is None else workspace
        hm._inner_host_mesh = native_view(hm, agent.connected())
        _agents_by_token[id(agent)] = agent
        return hm

    @property
    def agent(self) -> HostAgent:
        """The host agent that starts and stops this mesh's procs."""
        return self._agent

    @property
    def _shape(self) -> Shape:
        return self._mesh_shape

    def _new_with_shape(self, shape: Shape) -> HostMesh:
        if shape.region == self.region:
            return self
        hm = HostMesh.from_agent(self._agent, shape, owned=False)
        hm._state = self._state
        hm._python = self._python
        # The slice's native view is the owner's, sliced: at once if the owner's has resolved,
        # else once it does (Monarch's pending path).
        hm._inner_host_mesh = sliced_view(self._hy_host_mesh, shape.region)
        return hm

    def spawn_procs(
        self,
        per_host: dict[str, int] | None = None,
        bootstrap: Callable[[], Any] | None = None,
        name: str | None = None,
        proc_bind: list[dict[str, str]] | None = None,
        bootstrap_command: Any = None,
    ) -> ProcMesh:
        """Start procs on every host: dims are the host dims, then `per_host`'s; never blocks."""
        if self._state.shut_down or self._inner_host_mesh is None:
            raise RuntimeError("HostMesh has already been shut down")
        per_host = dict(per_host or {})
        labels = list(self._mesh_shape.labels)
        if set(per_host) & set(labels):
            # Monarch's text: every per_host label, then the host labels as a tuple.
            raise ValueError(
                f"per_host labels {list(per_host)} overlap with host labels {tuple(labels)}"
            )
        for label, size in per_host.items():
            if not isinstance(label, str) or isinstance(size, bool) or not isinstance(size, int) \
                    or size < 1:
                raise ValueError(
                    f"spawn_procs per_host must map dimension names to positive ints; got "
                    f"{label!r}: {size!r}."
                )
        n_per_host = math.prod(per_host.values()) if per_host else 1
        if proc_bind is not None and len(proc_bind) != n_per_host:
            raise ValueError(  # torchmonarch's text, then what to do
                f"proc_bind length ({len(proc_bind)}) must equal procs_per_host ({n_per_host}): "
                "give spawn_procs one binding per proc of a host."
            )
        hosts = self._mesh_shape.ranks()
        sizes = list(self._mesh_shape.ndslice.sizes) + list(per_host.values())
        shape = Shape(labels + list(per_host), Slice.new_row_major(sizes))
        commands = None
        if bootstrap_command is not None:
            # One command per proc, in rank order; a callable gets each proc's Point over the
            # hosts' dims then per_host's. The host agent checks what they are.
            commands = ([bootstrap_command(Point(r, shape.extent)) for r in range(len(shape))]
                        if callable(bootstrap_command) else [bootstrap_command] * len(shape))
        startup = hooks.proc_startup.get()
        before = startup() if startup is not None else []
        sink = record.SINK
        if sink is not None:  # the new procs record into this host's collector too
            before = [*before, observe.ProcTelemetry(sink.path)]
        if before:  # e.g. the client's actor mocks, which the new procs inherit
            bootstrap = StartupThenBootstrap(tuple(before), bootstrap)
        table = self._agent.spawn_procs(hosts, n_per_host, bootstrap, python=self._python,
                                        proc_bind=proc_bind, commands=commands)
        owner = current_instance()
        table.name = name or "anon"
        table.owner_key = owner.actor_key
        pm = ProcMesh._create(table, shape, host=self, name=table.name, owned=True)
        owner.owned_meshes.append(pm)
        table.mesh_key = mesh_id(pm)
        if sink is not None:
            observe.proc_mesh_spawned(pm, self, table)
        tree.add(table.mesh_key, table.name, owner_key(owner.actor_key), len(shape), actors=False)
        for callback in list(PROC_MESH_SPAWN_CALLBACKS):
            callback(pm)
        return pm

    def with_python_executable(self, python_executable: str) -> HostMesh:
        """This host mesh, but its procs run `python_executable` (a path on the hosts).

        The interpreter must be able to import monarch and its dependencies (a venv of the same
        Python version, say), or a script that starts one (`exec python "$@"`): the
        environment it sets reaches the procs, and procs started from such a proc with
        `this_host()` are launched through it too.
        """
        if not isinstance(python_executable, (str, os.PathLike)):
            raise TypeError(
                "HostMesh.with_python_executable takes the path of a Python interpreter (a str), "
                f"got {type(python_executable).__name__}."
            )
        path = os.fspath(python_executable)
        if not path:
            raise ValueError("HostMesh.with_python_executable got an empty path; pass the path "
                             "of a Python interpreter such as '/opt/venv/bin/python'.")
        if self._agent.is_local:
            # On this machine the path can be checked now rather than when a proc fails.
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                raise ValueError(
                    f"HostMesh.with_python_executable: {path!r} is not an executable file on "
                    "this host. Pass the path of a Python interpreter that can import monarch."
                )
            path = os.path.abspath(path)
        hm = HostMesh.from_agent(self._agent, self._mesh_shape, owned=self._owned)
        hm._state = self._state
        hm._inner_host_mesh = self._inner_host_mesh
        hm._python = path
        hm._workspace_ok = self._workspace_ok
        return hm

    async def sync_workspace(self, workspace: Any, conda: bool = False,
                             auto_reload: bool = False) -> None:
        """Mirror `workspace`'s directories (a `monarch.tools.config.Workspace`) on every host.

        Each directory lands at `$WORKSPACE_DIR/<its workspace path>` on the host (the host's
        `WORKSPACE_DIR`, else `~/.monarch/workspace`); only changed files travel. With
        `conda=True` the workspace's conda environment (or the active conda env or virtualenv)
        is mirrored too, at the same path. Procs started afterwards see the new files.
        """
        if not self._workspace_ok:
            raise RuntimeError(
                "cannot call sync_workspace on a sliced host mesh or one that was sent over an "
                "actor endpoint"
            )
        sync = hooks.workspace_sync.get()
        if sync is None:  # filled by importing monarch.tools.config, which a Workspace needs
            raise TypeError(
                "HostMesh.sync_workspace takes a monarch.tools.config.Workspace, e.g. "
                f"Workspace(dirs=['./my_project']); got {type(workspace).__name__}."
            )
        await sync(self, workspace, conda, auto_reload)

    @property
    def python_executable(self) -> str | None:
        """The interpreter set by `with_python_executable` (None: the hosts' default)."""
        return self._python

    @property
    def initialized(self) -> Future[bool]:
        """Resolves to True once every host is connected (remote hosts: raises naming one that
        could not be reached)."""
        return Future.from_concurrent(self._agent.connected(), lambda _: True)

    @property
    def region(self) -> Region:
        """The hosts' labels and slice of ranks."""
        return self._shape.region

    @property
    def _hy_host_mesh(self) -> Shared[NativeMesh]:
        """torchmonarch's handle on the mesh's Rust side: resolves to its `NativeMesh` (the
        region) once every host is connected (`mesh/native.py`); RuntimeError once this mesh
        was shut down."""
        if self._inner_host_mesh is None:
            raise RuntimeError("HostMesh has already been shut down")
        return self._inner_host_mesh

    def shutdown(self) -> Future[None]:
        """Stop every proc of these hosts; the host mesh cannot be used afterwards."""
        if not self._owned:
            raise RuntimeError("cannot shut down `HostMesh` that is a reference instead of owned")
        if self._state.shut_down or self._inner_host_mesh is None:
            raise RuntimeError("HostMesh has already been shut down")
        self._state.shut_down = True
        # Dropped at once (Monarch drops it when the shutdown ends): no use of this mesh may
        # start while its procs are being stopped.
        self._inner_host_mesh = None
        return Future.from_concurrent(self._agent.shutdown())

    def stop(self) -> Future[None]:
        """Stop the procs of this host mesh; the hosts stay usable."""
        if not self._owned:
            raise RuntimeError("cannot stop `HostMesh` that is a reference instead of owned")
        return Future.from_concurrent(self._agent.stop_all())  # remote hosts stay attached

    async def __aenter__(self) -> HostMesh:
        if self._state.shut_down or self._inner_host_mesh is None:
            raise RuntimeError("HostMesh has already been shut down")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if not self._state.shut_down:
            await self.shutdown()

    @property
    def is_fake_in_process(self) -> bool:
        """Always False: every host mesh here runs real processes."""
        return False

    @property
    def stream_logs(self) -> bool:
        """Whether new proc meshes stream their output to the client from the start."""
        return False

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HostMesh)
            and other._agent is self._agent
            and other._mesh_shape == self._mesh_shape
        )

    def __hash__(self) -> int:
        return hash((id(self._agent), self._mesh_shape))

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickled host mesh is a reference: whoever unpickles it may spawn procs on the same
        # hosts but not stop or shut them down (`_unpickle`).
        where = _HostsRef(
            origin_pid=os.getpid(), token=id(self._agent), local=self._agent.is_local,
            machine=socket.gethostname(), shut_down=self._state.shut_down,
        )
        return _unpickle, (where, self._mesh_shape, self._python)

    def __repr__(self) -> str:
        # Monarch's default object repr, under its module path (no extent in it).
        return f"<monarch._src.actor.host_mesh.HostMesh object at {id(self):#x}>"


class _HostState:
    """State shared by a host mesh and its slices."""

    def __init__(self) -> None:
        self.shut_down = False  # True once shutdown() was called on the owner
        self.telemetry_name: str | None = None  # its full name in the job's telemetry, once named


# The host agents of this process's host meshes, by id, for host meshes pickled and unpickled
# within this process (an actor of the controller handed one): they refer to the same agent.
# Weak: a reference keeps no agent alive once its meshes are gone.
_agents_by_token: weakref.WeakValueDictionary[int, HostAgent] = weakref.WeakValueDictionary()


class _HostsRef:
    """Where a pickled host mesh's hosts are: enough to find them again when unpickled."""

    def __init__(self, origin_pid: int, token: int, local: bool, machine: str,
                 shut_down: bool) -> None:
        self.origin_pid = origin_pid  # the process whose agent runs the hosts
        self.token = token  # id() of that agent there
        self.local = local  # the hosts are the origin's own machine (its fork server)
        self.machine = machine  # the origin's host name
        self.shut_down = shut_down  # the mesh had been shut down when it was pickled


def _unpickle(where: _HostsRef, shape: Shape, python: str | None) -> HostMesh:
    """A host mesh sent to another actor, as a reference (never owned).

    In the process that pickled it, it is the same hosts. Elsewhere, the hosts of the sender's
    own machine (`this_host()`, a slice of it) are this machine's hosts when the receiver runs on
    that machine, as on Monarch where every proc of a host shares it. Hosts the sender attached
    from a cluster are served to one client at a time, the sender: spawning on them from here is
    refused, saying so.
    """
    agent: HostAgent | None = None
    if where.origin_pid == os.getpid():
        agent = _agents_by_token.get(where.token)
    elif where.local and where.machine == socket.gethostname():
        agent = hooks.local_host.require()()
    if agent is None:
        agent = UnreachableHosts(where)
    hm = HostMesh.from_agent(agent, shape, owned=False)
    hm._python = python
    hm._state.shut_down = where.shut_down
    return hm


def _refused(why: str) -> concurrent.futures.Future[None]:
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    done.set_exception(RuntimeError(why))
    return done


class UnreachableHosts:
    """The `HostAgent` of a host mesh unpickled where its hosts cannot be driven from: hosts
    attached by another process (served to that client only) or another machine's own hosts.
    It has no procs; spawning raises saying why and what to do."""

    is_local = False

    def __init__(self, where: _HostsRef) -> None:
        kind = "its own machine's hosts" if where.local else "the hosts it attached"
        self.why = (
            f"This HostMesh was sent from process {where.origin_pid} on {where.machine}, and "
            f"{kind} can only be driven by that process. Spawn the procs there and send the "
            "ProcMesh or ActorMesh instead."
        )

    def spawn_procs(
        self, hosts: list[int], per_host: int, bootstrap: Callable[[], Any] | None, *,
        python: str | None = None, proc_bind: list[dict[str, str]] | None = None,
        commands: list[Any] | None = None,
    ) -> ProcTable:
        raise RuntimeError(self.why)

    def connected(self) -> concurrent.futures.Future[None]:
        return _refused(self.why)

    def stop_procs(self, table: ProcTable, reason: str) -> concurrent.futures.Future[None]:
        return _refused(self.why)

    def stop_all(self) -> concurrent.futures.Future[None]:
        return _refused(self.why)

    def shutdown(self) -> concurrent.futures.Future[None]:
        return _refused(self.why)

    def set_log_level(self, table: ProcTable, level: int) -> concurrent.futures.Future[None]:
        return _refused(self.why)

    def flush_logs(self, tables: list[ProcTable] | None = None) -> concurrent.futures.Future[None]:
        return _refused(self.why)

    def snapshot(self) -> list[PlacedTable]:
        return []

    def live_addresses(self) -> list[str]:
        return []


def current_host() -> HostMesh:
    """`this_host()`: the owned, zero-dimension host mesh of this machine, whose agent the
    `local_host` slot makes (filled when `monarch._src.hosts.local` is imported)."""
    agent = hooks.local_host.require()()
    return HostMesh.from_agent(agent, Shape([], Slice(offset=0, sizes=[], strides=[])), True)
