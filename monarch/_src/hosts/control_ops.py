"""The hosts layer's control operations: one typed record per operation (`runtime/control.py`).

Between a proc and the host agent that spawned it (`local.py`, `proc_main.py`, `proc_stop.py`,
`proc_logs.py`), and between a client and the host servers it attaches to (`remote_agent.py`,
`served.py`, `gateway.py`). Each handler takes its record and reads the fields by name; senders
build the records and post `control(record, reply)`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from monarch._src.runtime.control import control_op

__all__ = [
    "FlushLogs",
    "GatewayAttach",
    "HostAttach",
    "HostDetach",
    "HostFlushLogs",
    "HostSpawn",
    "HostStop",
    "Log",
    "LogLevel",
    "LogTail",
    "ProcOutput",
    "ProcReady",
    "RemoteLog",
    "RemoteProcFailed",
    "RemoteProcReady",
    "StopProc",
]


# ---- a proc and its host agent ------------------------------------------------------------
@control_op("proc_ready")
class ProcReady(NamedTuple):
    """What a starting proc reports to the process that spawned it: up, or why not."""

    proc_id: str
    address: str  # where the proc listens ("" when it did not start)
    pid: int  # 0 when no process was started
    error: str | None = None  # None: the proc is up; else why it failed to start
    setup_error: Any = None  # the encoded exception Monarch's setup actor raises (bootstrap)


class ProcOutput(NamedTuple):
    """Lines a proc wrote to `fd` (1 or 2)."""

    proc_id: str
    fd: int
    text: str


@control_op("log")
class Log(ProcOutput):
    """Output a proc forwards to its host agent (`enable_log_forwarding`)."""

    __slots__ = ()


@control_op("log_tail")
class LogTail(ProcOutput):
    """Output of a proc that is not forwarded, kept by its host agent for failure reports."""

    __slots__ = ()


@control_op("stop_proc")
class StopProc(NamedTuple):
    """Stop the receiving proc's actors, answer, then exit."""

    reason: str


@control_op("flush_logs")
class FlushLogs(NamedTuple):
    """Answer once every line the receiving proc wrote so far was handed to its host agent."""


@control_op("log_level")
class LogLevel(NamedTuple):
    """Set the Python logging level of the receiving proc."""

    level: int


# ---- a client and the host servers it attaches to -------------------------------------------
@control_op("host_attach")
class HostAttach(NamedTuple):
    """A client attaches to a host server; answered with the host's description."""

    client: str  # the client's address
    root: str  # the address of the client's root process
    dialed_host: str  # the host part of the address the client dialed


@control_op("host_spawn")
class HostSpawn(NamedTuple):
    """Spawn procs `proc_ids` for `client`, as its table `table_id`, from `spec`."""

    client: str
    table_id: str
    proc_ids: list[str]
    spec: dict[str, Any]


@control_op("host_stop")
class HostStop(NamedTuple):
    """Stop the procs of the client's table `table_id`; answer once they exited."""

    table_id: str
    reason: str


@control_op("host_flush_logs")
class HostFlushLogs(NamedTuple):
    """Answer once the lines the host's procs wrote so far were forwarded."""


@control_op("host_detach")
class HostDetach(NamedTuple):
    """The client lets the host go (its procs stop); the host exits too if `exit_host`."""

    exit_host: bool


@control_op("gateway_attach")
class GatewayAttach(NamedTuple):
    """A client bootstrapping through this host (`hosts/gateway.py`) opens its connection."""

    client: str


@control_op("remote_proc_ready")
class RemoteProcReady(ProcReady):
    """A host server forwards the `ProcReady` of a proc it spawned to its client."""

    __slots__ = ()


@control_op("remote_proc_failed")
class RemoteProcFailed(NamedTuple):
    """A proc a host server spawned for the client died (`report` says how)."""

    proc_id: str
    report: str


@control_op("remote_log")
class RemoteLog(ProcOutput):
    """A host server forwards output of a proc to its client."""

    __slots__ = ()
