"""Hook slots: where a feature above the mesh layer plugs behaviour into it.

The mesh layer calls features it may not import (the tensor engine, the job feature's workspace
sync, the facade's fault hook). Each such call goes through a `Slot` defined here; the wiring
module of the process kind (`monarch._src.wiring.controller` / `.proc`) fills the slots with the
feature's functions. A slot left empty means "feature absent": its caller either does without or
raises the slot's own error, which names what is missing and how to get it.

Every slot is documented where it is defined, with the signature its value must have.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["SLOTS", "Slot"]

T = TypeVar("T")


class Slot(Generic[T]):
    """One named place for a feature's implementation (a function or a factory).

    `install(value)` fills it (a later install replaces the earlier one: the last wiring wins),
    `get()` returns the value or None, `require()` returns it or raises `RuntimeError` with the
    slot's `missing` text.
    """

    __slots__ = ("_lock", "_value", "doc", "missing", "name")

    def __init__(self, name: str, doc: str, missing: str) -> None:
        self.name = name
        self.doc = doc
        self.missing = missing
        self._value: T | None = None
        self._lock = threading.Lock()

    def install(self, value: T) -> None:
        with self._lock:
            self._value = value

    def get(self) -> T | None:
        return self._value

    def require(self) -> T:
        value = self._value
        if value is None:
            raise RuntimeError(f"{self.missing} (hook slot {self.name!r} is empty)")
        return value

    def __repr__(self) -> str:
        state = "empty" if self._value is None else f"filled with {self._value!r}"
        return f"<Slot {self.name} ({self.doc}): {state}>"


SLOTS: dict[str, Slot[Any]] = {}  # every slot by name (what a process has filled: tests, debugging)


def _slot(name: str, doc: str, missing: str) -> Slot[Any]:
    slot: Slot[Any] = Slot(name, doc, missing)
    SLOTS[name] = slot
    return slot


# --- filled by the controller wiring (monarch._src.wiring.controller) unless said otherwise -----

#: `rref(endpoint, args, kwargs) -> Tensor`: an endpoint called as a tensor-engine `rref`.
rref: Slot[Callable[..., Any]] = _slot(
    "rref",
    "The tensor engine's Endpoint.rref implementation.",
    "Endpoint.rref needs the tensor engine: import monarch.actor (or monarch) first",
)

#: `mesh_engine(proc_mesh) -> Engine`: the tensor engine of a proc mesh, made on first use.
mesh_engine: Slot[Callable[[Any], Any]] = _slot(
    "mesh_engine",
    "The tensor engine's per-proc-mesh Engine factory (ProcMesh.activate and friends).",
    "The tensor engine is not installed: import monarch.actor (or monarch) first",
)

#: `fault_hook() -> Callable[[MeshFailure], None] | None`: the client's current
#: `unhandled_fault_hook` (looked up on each fault, so a user may reassign it at any time).
#: Filled by the `monarch.actor` facade itself, whose attribute it reads.
fault_hook: Slot[Callable[[], Any]] = _slot(
    "fault_hook",
    "Looks up monarch.actor.unhandled_fault_hook each time a fault reaches the client.",
    "No unhandled fault hook is installed",
)

#: `workspace_sync(host_mesh, workspace, conda, auto_reload) -> None`: HostMesh.sync_workspace.
#: Filled by `monarch.tools.config.workspace` when it is imported (a `Workspace` cannot exist
#: before), so an empty slot means the argument is not a Workspace.
workspace_sync: Slot[Callable[..., Any]] = _slot(
    "workspace_sync",
    "The workspace sync behind HostMesh.sync_workspace.",
    "HostMesh.sync_workspace takes a monarch.tools.config.Workspace",
)

#: `local_host() -> HostAgent`: the process's local host agent (made on first call).
local_host: Slot[Callable[[], Any]] = _slot(
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
call_encoder: Slot[Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = _slot(
    "call_encoder",
    "The tensor engine's encoder of endpoint arguments that hold distributed tensors.",
    "No endpoint argument encoder is installed",
)

#: `future_view(future) -> mimebundle | None`: what a mesh call's future (`MeshFuture`) shows as
#: a cell's value: the notebook's live per-rank widget. Filled by `monarch.notebook.install()`
#: in a Jupyter kernel; empty (or None returned) means the plain repr.
future_view: Slot[Callable[[Any], dict[str, Any] | None]] = _slot(
    "future_view",
    "The notebook's live widget of a mesh call future, shown as a cell's value.",
    "No notebook is installed: a mesh call future shows its plain repr",
)

#: `logging_manager(proc_mesh) -> LoggingManager`: torchmonarch's per-mesh log client
#: (`ProcMesh._logging_manager`). Filled by `monarch._src.actor.logging` when it is imported
#: (Monarch's private path, which code reading that attribute imports).
logging_manager: Slot[Callable[[Any], Any]] = _slot(
    "logging_manager",
    "torchmonarch's LoggingManager of a proc mesh (ProcMesh._logging_manager).",
    "ProcMesh._logging_manager is torchmonarch's private log client: import "
    "monarch._src.actor.logging first",
)

# --- filled by monarch._src.actor.mock when a patch is first used (and in procs it reaches) ----

#: `actor_class(Class) -> Class`: the class `ProcMesh.spawn` really spawns when asked for
#: `Class` (an actor mock from `patch_actor`; `Class` itself when it is not patched).
actor_class: Slot[Callable[[type], type]] = _slot(
    "actor_class",
    "The actor mocks' substitution of the class a spawn makes (patch_actor).",
    "No actor mocks are installed",
)

#: `proc_startup() -> list[Callable[[], None]]`: callables (picklable) that each proc of a new
#: `spawn_procs` runs before its bootstrap, e.g. to carry the client's actor mocks there. An
#: empty list means there is nothing to run.
proc_startup: Slot[Callable[[], list[Callable[[], None]]]] = _slot(
    "proc_startup",
    "What each new proc runs before its bootstrap (the mock registries it inherits).",
    "No proc start-up functions are installed",
)

#: `device_mesh_override(proc_mesh) -> DeviceMesh | None`: the tensor engine the calling actor
#: uses for `proc_mesh` in place of a real one (`patch_tensor_engine`), or None for the real
#: engine (the `mesh_engine` slot).
device_mesh_override: Slot[Callable[[Any], Any]] = _slot(
    "device_mesh_override",
    "The tensor engine mocks' replacement of a proc mesh's DeviceMesh (patch_tensor_engine).",
    "No tensor engine mocks are installed",
)
