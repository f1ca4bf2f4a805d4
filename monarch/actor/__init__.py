"""monarch.actor: actors, meshes, endpoints and their adverbs.

Define an `Actor` subclass with `@endpoint` methods; start processes with
`this_host().spawn_procs(per_host={"gpus": 4})`; spawn actors on them with `procs.spawn(name,
Class, *args)`; call endpoints with `call`, `call_one`, `choose`, `stream` and `broadcast`. Every
remote operation returns a `Future` at once: `.get()` blocks, `await` does not.

`config` holds attribute-style actor settings (`config.prefix_python_logs_with_actor`);
`unhandled_fault_hook` is looked up on this module each time a fault reaches the client.
"""

from __future__ import annotations

import sys
from typing import Any

from monarch._src.config import ChannelTransport, configure, get as _config_get, parse_transport
from monarch._src.debug import debug_controller
from monarch._src.hosts.gateway import attach
from monarch._src.hosts.remote import (
    attach_to_workers,
    default_bootstrap_cmd,
    hosts_from_config,
    hosts_from_dask,
    run_worker_loop_forever,
    run_worker_loop_until_shutdown,
    start_worker_loop_forever,
)
from monarch._src.mesh import hooks as _hooks, telemetry as _telemetry
from monarch._src.mesh.accumulator import Accumulator
from monarch._src.mesh.actor import Actor, concurrent_endpoint, endpoint
from monarch._src.mesh.actor_mesh import ActorMesh
from monarch._src.mesh.context import (
    Context,
    Instance,
    check_cancelled,
    context,
    current_actor_name,
    current_rank,
    current_size,
)
from monarch._src.mesh.controller import get_or_spawn_controller
from monarch._src.mesh.endpoint import Endpoint, as_endpoint, send
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.lifecycle import shutdown_context
from monarch._src.mesh.log_prefix import install_log_prefix as _install_log_prefix
from monarch._src.mesh.port import Channel, Port, PortReceiver
from monarch._src.mesh.proc_mesh import ProcMesh, this_proc
from monarch._src.mesh.returns_future import returns_future
from monarch._src.mesh.telemetry import span, traced
from monarch._src.mesh.value_mesh import ValueMesh
from monarch._src.runtime.future import Future
from monarch._src.runtime.runtime import runtime_if_started as _runtime_if_started
from monarch._src.shape import Extent, Point
from monarch._src.supervision.errors import ActorError, MeshFailure
from monarch._src.wiring import controller as _wiring

_wiring.install()
_hooks.fault_hook.install(lambda: unhandled_fault_hook)  # read at each fault: users reassign it

def get_meter(name: str | None = None, *args: Any, **kwargs: Any) -> Any:
    """Monarch's meter, as on Monarch: `get_meter()` is the process-wide meter (scope
    "monarch") whose instruments become the job's `metric_*` telemetry rows (and OTLP and
    Prometheus, see `monarch._src.telemetry.metrics`); `get_meter(name, ...)` is
    OpenTelemetry's meter `name` (a meter that drops measurements without OpenTelemetry)."""
    if name is None and not args and not kwargs and _telemetry.OTEL:
        from monarch._src.telemetry.otel import get_meter as monarch_meter

        return monarch_meter()
    return _telemetry.get_meter("monarch" if name is None else name, *args, **kwargs)


__all__ = [
    "Accumulator",
    "Actor",
    "ActorError",
    "Channel",
    "ChannelTransport",
    "Context",
    "Endpoint",
    "Extent",
    "Future",
    "HostMesh",
    "MeshFailure",
    "Point",
    "Port",
    "PortReceiver",
    "ProcId",
    "ProcMesh",
    "Uid",
    "ValueMesh",
    "as_endpoint",
    "attach",
    "attach_to_workers",
    "check_cancelled",
    "concurrent_endpoint",
    "config",
    "context",
    "current_actor_name",
    "current_rank",
    "current_size",
    "debug_controller",
    "default_bootstrap_cmd",
    "enable_transport",
    "endpoint",
    "get_meter",
    "get_or_spawn_controller",
    "hosts_from_config",
    "hosts_from_dask",
    "returns_future",
    "run_worker_loop_forever",
    "run_worker_loop_until_shutdown",
    "send",
    "shutdown_context",
    "span",
    "start_worker_loop_forever",
    "this_host",
    "this_proc",
    "traced",
    "unhandled_fault_hook",
]

_ = (ActorMesh, Instance)


def this_host() -> HostMesh:
    """The host mesh of the machine running the current actor or client (no dimensions)."""
    from monarch._src.hosts.local import this_host as _this_host

    return _this_host()


def unhandled_fault_hook(failure: MeshFailure) -> None:
    """Called with each supervision failure that reached the client unhandled.

    Replace it by assignment (`monarch.actor.unhandled_fault_hook = fn`); it is looked up at
    call time. Returning drops the failure; raising anything (the default raises `SystemExit`)
    makes it fatal: the report is written to stderr and the main thread gets a
    `KeyboardInterrupt`, which, uncaught, ends the program after its atexit handlers ran.
    """
    sys.exit(1)


def enable_transport(transport: ChannelTransport | str) -> None:
    """Choose the transport before any other monarch call (a string or a ChannelTransport)."""
    value = parse_transport(transport)
    if _runtime_if_started() is not None and value != _config_get("default_transport"):
        raise RuntimeError(
            f"enable_transport({transport!r}) must be called before monarch starts; the runtime "
            "already uses another transport."
        )
    configure(default_transport=value)


class ProcId(str):
    """The id of a proc."""


class Uid(str):
    """A unique id from the runtime."""


class _ActorConfig:
    """`monarch.actor.config`: attribute-style access to actor settings."""

    @property
    def prefix_python_logs_with_actor(self) -> bool:
        return bool(_config_get("prefix_python_logs_with_actor"))

    @prefix_python_logs_with_actor.setter
    def prefix_python_logs_with_actor(self, value: bool) -> None:
        configure(prefix_python_logs_with_actor=value)

    def __repr__(self) -> str:
        return (
            "<monarch.actor.config "
            f"prefix_python_logs_with_actor={self.prefix_python_logs_with_actor}>"
        )


config: Any = _ActorConfig()


def _hook_into_ipython() -> None:
    """Under IPython/Jupyter, the notebook integration (`monarch.notebook`) is switched on."""
    if "IPython" not in sys.modules:
        return
    from monarch.notebook import install

    install()


_hook_into_ipython()
_install_log_prefix()
