"""The extension surface: what features (rdma, tensor, simulator, job, spmd, debug, admin) and the
notebook may use of the layers below them, besides the programming model itself (`Actor`,
`endpoint`, `context()`, the meshes).

Features import these names from here, never from `runtime/` or `transport/` directly, and never
an underscore name from anywhere (tests/unit/test_layers.py checks both). Each name keeps its
home module, where its documentation lives:

* Casting (`mesh/casting.py`, also as the module `casting`): `plan(mesh) -> CastPlan` (the ranks,
  routing keys, actor key and extent of a call to an actor mesh),
  `target(endpoint) -> EndpointTarget`, `check(mesh)`, `encode_args -> Encoded` (the payload
  and the reply ports pickled in it), `post_call(...)` (one
  `Call` per target rank, through one relay proc per host when `cast_tree` says so:
  `mesh/relay.py`).
* Futures (`runtime/future.py`): `Future` with `from_concurrent`, `from_value`,
  `from_exception`, `map`, `wait`, `outcome`; `loop_running_here()`, `check_timeout`.
* Ports (`runtime/ports.py`): `PortEntry`, the base of every port-table entry (subclass it and
  `runtime.open_port(entry)`), and the stock entries `OncePort`, `GatherPort`, `StreamPort`;
  `decode_reply`.
* Envelopes (`runtime/envelope.py`): the typed records `Call`, `PortMsg` and their kinds,
  `encode`/`decode` of payloads.
* Control operations (`runtime/control.py`): `@control_op(name)` declares a `NamedTuple` as
  one; `control(record, reply)` is its envelope; `op_name`; a feature registers its handlers
  with `rt.mailbox.control.register(Record, handler)`.
* The runtime (`runtime/runtime.py`): `get_runtime()`, `runtime_if_started()`, `Runtime` (its
  `shutdown_hooks`, control handlers), `on_start` (functions run on every runtime this process
  starts: where features register their control operations; `install_on_start(hook)` registers
  one and runs it on the runtime already running), `routable_ip()`.
* Host agents (`mesh/host_agent.py`): the `HostAgent` protocol and the registry of this process's
  live agents (`agents()`, `register`, `forget`), each with `snapshot() -> list[PlacedTable]`.
* Rank state (`mesh/rank_state.py`): `RankState`, `Health`, `proc_rank_state`,
  `actor_rank_state` (one state per rank, the ownership tree's order everywhere).
* Proc meshes (`mesh/proc_mesh.py`): `proc_table(mesh)`, `mesh_id(mesh)`, `root_of(mesh)`.
* Mesh call futures (`mesh/call_future.py`): `MeshFuture` (what `endpoint.call()` returns:
  `partial()`, iteration, `progress()`), `CallProgress`, `RankProgress`.
* Hook slots (`mesh/hooks.py`, as `hooks`): where a feature plugs into the layers below it;
  the wiring modules (`monarch._src.wiring`) fill them.
* Errors: `failure_report(...)` builds "The actor X and all its descendants have failed:".
* Files named after their process (`transport/owned_files.py`): `owned_name`, `sweep_ended`
  (remove those whose process is gone), `process_start_time`, `SHM_DIR`, `SHM_PREFIX`.
* TLS (`transport/tls.py`): `tls_enabled()`, `ssl_contexts()` (the stdlib (server, client)
  contexts of the configured mutual TLS, for servers that are not monarch connections).
* Progress reports of long work (`runtime/progress.py`): `Progress`, `ProgressState`,
  `TerminalRenderer`, `NullRenderer`, `set_renderer_factory`, `format_bytes`, `LARGE_TRANSFER`.
"""

from __future__ import annotations

from monarch._src.mesh import casting, hooks
from monarch._src.mesh.call_future import CallProgress, MeshFuture, RankProgress
from monarch._src.mesh.casting import (
    CastPlan,
    Encoded,
    EndpointTarget,
    check,
    encode_args,
    plan,
    post_call,
    target,
)
from monarch._src.mesh.context import current_hosted
from monarch._src.mesh.host_agent import HostAgent, PlacedTable, agents, forget, register
from monarch._src.mesh.proc_mesh import mesh_id, proc_table, root_of
from monarch._src.mesh.rank_state import Health, RankState, actor_rank_state, proc_rank_state
from monarch._src.runtime.control import control, control_op, op_name
from monarch._src.runtime.envelope import (
    CALL,
    PORT,
    PORT_CLOSED,
    PORT_ERROR,
    PORT_VALUE,
    Call,
    PortMsg,
    decode,
    encode,
)
from monarch._src.runtime.future import (
    Future,
    Interrupted,
    check_timeout,
    loop_running_here,
    quiet_blocking_on,
)
from monarch._src.runtime.ports import GatherPort, OncePort, PortEntry, StreamPort, decode_reply
from monarch._src.runtime.progress import (
    LARGE_TRANSFER,
    NullRenderer,
    Progress,
    ProgressState,
    TerminalRenderer,
    format_bytes,
    set_renderer_factory,
)
from monarch._src.runtime.runtime import (
    Runtime,
    get_runtime,
    install_on_start,
    on_start,
    routable_ip,
    runtime_if_started,
)
from monarch._src.supervision.errors import failure_report
from monarch._src.transport.owned_files import (
    SHM_DIR,
    SHM_PREFIX,
    owned_name,
    process_start_time,
    sweep_ended,
)
from monarch._src.transport.tls import ssl_contexts, tls_enabled

__all__ = [
    "CALL",
    "LARGE_TRANSFER",
    "PORT",
    "PORT_CLOSED",
    "PORT_ERROR",
    "PORT_VALUE",
    "SHM_DIR",
    "SHM_PREFIX",
    "Call",
    "CallProgress",
    "CastPlan",
    "Encoded",
    "EndpointTarget",
    "Future",
    "GatherPort",
    "Health",
    "HostAgent",
    "Interrupted",
    "MeshFuture",
    "NullRenderer",
    "OncePort",
    "PlacedTable",
    "PortEntry",
    "PortMsg",
    "Progress",
    "ProgressState",
    "RankProgress",
    "RankState",
    "Runtime",
    "StreamPort",
    "TerminalRenderer",
    "actor_rank_state",
    "agents",
    "casting",
    "check",
    "check_timeout",
    "control",
    "control_op",
    "current_hosted",
    "decode",
    "decode_reply",
    "encode",
    "encode_args",
    "failure_report",
    "forget",
    "format_bytes",
    "get_runtime",
    "hooks",
    "install_on_start",
    "loop_running_here",
    "mesh_id",
    "on_start",
    "op_name",
    "owned_name",
    "plan",
    "post_call",
    "proc_rank_state",
    "proc_table",
    "process_start_time",
    "quiet_blocking_on",
    "register",
    "root_of",
    "routable_ip",
    "runtime_if_started",
    "set_renderer_factory",
    "ssl_contexts",
    "sweep_ended",
    "target",
    "tls_enabled",
]
