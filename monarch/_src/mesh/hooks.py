"""Hook slots: where a feature above the mesh layer plugs behaviour into it.

The mesh layer calls features it may not import (the tensor engine, the job feature's workspace
sync, the facade's fault hook, the debugger). Each such call goes through a `Slot` (the one hook
mechanism, `runtime/hook.py`) defined here; the wiring module of the process kind
(`monarch._src.wiring.controller` / `.proc`) or the feature itself fills the slots with the
feature's functions. A slot left empty means "feature absent": its caller either does without or
raises the slot's own error, which names what is missing and how to get it.

Each slot's type is a `Protocol` whose `__call__` is the signature its value must have, so
mypy checks both the function installed and the caller's arguments; what a feature returns
that the mesh may not name (a tensor, an engine, a device mesh) is typed `Any`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from monarch._src.runtime.hook import Hook, Slot

if TYPE_CHECKING:
    from monarch._src.mesh.call_future import MeshFuture
    from monarch._src.mesh.endpoint import Endpoint
    from monarch._src.mesh.host_agent import HostAgent
    from monarch._src.mesh.host_mesh import HostMesh
    from monarch._src.mesh.hosted import HostedActor
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.supervision.errors import MeshFailure

__all__ = ["SLOTS", "Hook", "Slot"]

T = TypeVar("T")

SLOTS: dict[str, Slot[Any]] = {}  # every slot by name (what a process has filled: tests, debugging)


def _slot(name: str, doc: str, missing: str) -> Slot[Any]:
    slot: Slot[Any] = Slot(name, doc, missing)
    SLOTS[name] = slot
    return slot


class RrefHook(Protocol):
    def __call__(self, endpoint: Endpoint[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], /) -> Any: ...


class MeshEngineHook(Protocol):
    def __call__(self, proc_mesh: ProcMesh, /) -> Any: ...


class FaultHookLookup(Protocol):
    def __call__(self) -> Callable[[MeshFailure], None]: ...


class WorkspaceSyncHook(Protocol):
    def __call__(self, host_mesh: HostMesh, workspace: Any, conda: bool, auto_reload: bool,
                 /) -> Awaitable[None]: ...


class LocalHostHook(Protocol):
    def __call__(self) -> HostAgent: ...


class CallEncoderHook(Protocol):
    def __call__(self, endpoint: Endpoint[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], /) -> Any: ...


class FutureViewHook(Protocol):
    def __call__(self, future: MeshFuture[Any], /) -> dict[str, Any] | None: ...


class LoggingManagerHook(Protocol):
    def __call__(self, proc_mesh: ProcMesh, /) -> Any: ...


class ActorClassHook(Protocol):
    def __call__(self, cls: type, /) -> type: ...


class ProcStartupHook(Protocol):
    def __call__(self) -> list[Callable[[], None]]: ...


class DeviceMeshOverrideHook(Protocol):
    def __call__(self, proc_mesh: ProcMesh, /) -> Any: ...


class EndpointDoneHook(Protocol):
    def __call__(self, actor: HostedActor, /) -> None: ...


class EndpointErrorHook(Protocol):
    def __call__(self, actor: HostedActor, method: str, exc: BaseException, /) -> None: ...


# --- filled by the controller wiring (monarch._src.wiring.controller) unless said otherwise -----

#: `rref(endpoint, args, kwargs) -> Tensor`: an endpoint called as a tensor-engine `rref`.
rref: Slot[RrefHook] = _slot(
    "rref",
    "The tensor engine's Endpoint.rref implementation.",
    "Endpoint.rref needs the tensor engine: import monarch.actor (or monarch) first",
)

#: `mesh_engine(proc_mesh) -> Engine`: the tensor engine of a proc mesh, made on first use.
mesh_engine: Slot[MeshEngineHook] = _slot(
    "mesh_engine",
    "The tensor engine's per-proc-mesh Engine factory (ProcMesh.activate and friends).",
    "The tensor engine is not installed: import monarch.actor (or monarch) first",
)

#: `fault_hook() -> Callable[[MeshFailure], None]`: the client's current
#: `unhandled_fault_hook` (looked up on each fault, so a user may reassign it at any time).
#: Filled by the `monarch.actor` facade itself, whose attribute it reads.
fault_hook: Slot[FaultHookLookup] = _slot(
    "fault_hook",
    "Looks up monarch.actor.unhandled_fault_hook each time a fault reaches the client.",
    "No unhandled fault hook is installed",
)

#: `await workspace_sync(host_mesh, workspace, conda, auto_reload)`: HostMesh.sync_workspace.
#: Filled by `monarch.tools.config.workspace` when it is imported (a `Workspace` cannot exist
#: before), so an empty slot means the argument is not a Workspace.
workspace_sync: Slot[WorkspaceSyncHook] = _slot(
    "workspace_sync",
    "The workspace sync behind HostMesh.sync_workspace.",
    "HostMesh.sync_workspace takes a monarch.tools.config.Workspace",
)

#: `local_host() -> HostAgent`: the process's local host agent (made on first call).
local_host: Slot[LocalHostHook] = _slot(
    "local_host",
    "The local host agent factory behind this_host() (monarch._src.hosts.local).",
    "No local host agent is installed: import monarch.actor first",
)

#: `proc_setup`: "module:function" names each new proc imports and calls once at start-up,
#: before it serves (the proc wiring: debug and admin agents). Strings, so a proc spawned on
#: another host resolves them there.
proc_setup: Slot[tuple[str, ...]] = _slot(
    "proc_setup",
    "What a new proc runs at start-up to install its proc-side agents.",
    "No proc set-up is installed",
)

#: `call_encoder(endpoint, args, kwargs) -> payload`: encodes an endpoint call's arguments in
#: place of the plain `encode((args, kwargs))`; a payload that is not a plain tuple holds
#: distributed tensors and posts itself (`payload.post(endpoint, reply, ranks)`). Installed by
#: the tensor engine when it loads (`monarch._src.tensor.actor_calls`).
call_encoder: Slot[CallEncoderHook] = _slot(
    "call_encoder",
    "The tensor engine's encoder of endpoint arguments that hold distributed tensors.",
    "No endpoint argument encoder is installed",
)

#: `future_view(future) -> mimebundle | None`: what a mesh call's future (`MeshFuture`) shows as
#: a cell's value: the notebook's live per-rank widget. Filled by `monarch.notebook.install()`
#: in a Jupyter kernel; empty (or None returned) means the plain repr.
future_view: Slot[FutureViewHook] = _slot(
    "future_view",
    "The notebook's live widget of a mesh call future, shown as a cell's value.",
    "No notebook is installed: a mesh call future shows its plain repr",
)

#: `logging_manager(proc_mesh) -> LoggingManager`: torchmonarch's per-mesh log client
#: (`ProcMesh._logging_manager`). Filled by `monarch._src.actor.logging` when it is imported
#: (Monarch's private path, which code reading that attribute imports).
logging_manager: Slot[LoggingManagerHook] = _slot(
    "logging_manager",
    "torchmonarch's LoggingManager of a proc mesh (ProcMesh._logging_manager).",
    "ProcMesh._logging_manager is torchmonarch's private log client: import "
    "monarch._src.actor.logging first",
)

# --- filled by monarch._src.actor.mock when a patch is first used (and in procs it reaches) ----

#: `actor_class(Class) -> Class`: the class `ProcMesh.spawn` really spawns when asked for
#: `Class` (an actor mock from `patch_actor`; `Class` itself when it is not patched).
actor_class: Slot[ActorClassHook] = _slot(
    "actor_class",
    "The actor mocks' substitution of the class a spawn makes (patch_actor).",
    "No actor mocks are installed",
)

#: `proc_startup() -> list[Callable[[], None]]`: callables (picklable) that each proc of a new
#: `spawn_procs` runs before its bootstrap, e.g. to carry the client's actor mocks there. An
#: empty list means there is nothing to run.
proc_startup: Slot[ProcStartupHook] = _slot(
    "proc_startup",
    "What each new proc runs before its bootstrap (the mock registries it inherits).",
    "No proc start-up functions are installed",
)

#: `device_mesh_override(proc_mesh) -> DeviceMesh | None`: the tensor engine the calling actor
#: uses for `proc_mesh` in place of a real one (`patch_tensor_engine`), or None for the real
#: engine (the `mesh_engine` slot).
device_mesh_override: Slot[DeviceMeshOverrideHook] = _slot(
    "device_mesh_override",
    "The tensor engine mocks' replacement of a proc mesh's DeviceMesh (patch_tensor_engine).",
    "No tensor engine mocks are installed",
)

# --- filled by the debugger (monarch._src.debug.agent) -------------------------------------------

#: `endpoint_done(actor)`: on the actor's thread when an endpoint returned, before its value is
#: sent (the call's debug session ends there). Filled once an actor of this process stopped in
#: the debugger; empty keeps dispatch free of any debugging cost.
endpoint_done: Slot[EndpointDoneHook] = _slot(
    "endpoint_done",
    "The debugger's end of an endpoint call's session.",
    "No debugger is installed",
)

#: `endpoint_error(actor, method, exc)`: on the actor's thread when an endpoint raised, before
#: the outcome is sent; it may block the actor (a post-mortem pdb session). Filled once an actor
#: of this process stopped in the debugger, or while post-mortem debugging is on.
endpoint_error: Slot[EndpointErrorHook] = _slot(
    "endpoint_error",
    "The debugger's post-mortem of an endpoint that raised.",
    "No debugger is installed",
)
