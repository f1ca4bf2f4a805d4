"""Every config key this implementation knows, with its kind, default and meaning.

The table is the single source of truth: the default layer, the environment layer (via each key's
environment names), validation and `get_global_config()`'s key set are all derived from it.

No key is ignored in silence. Each one either changes what the runtime does (its doc says how)
or is *inert*: a key of Meta's Monarch with no counterpart here. An inert key is accepted and
read back like any other (code and tests written for Meta's Monarch set and read these keys),
but the first time it is given a value other than its default, through `configure`, an
environment variable or the config file, an `InertConfigWarning` names the key, says why it
changes nothing here and what to use instead (`inert` below).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

from monarch._src.config.duration import normalize_duration
from monarch._src.config.encoding import Encoding
from monarch._src.config.spec import ConfigKey, Kind, Namespace, env_names_for
from monarch._src.config.transport import ChannelTransport

__all__ = ["INERT", "KEYS", "InertConfigWarning", "inert", "lookup", "unknown_key_error"]

_H = Namespace.HYPERACTOR
_MESH = Namespace.MESH
_M = Namespace.MONARCH

_GIB = 1024**3


def _key(
    name: str,
    kind: Kind,
    default: object,
    doc: str,
    namespace: Namespace,
    *,
    nullable: bool = False,
    check: Callable[[object], object] | None = None,
) -> ConfigKey:
    if kind is Kind.DURATION and isinstance(default, str):
        default = normalize_duration(default)
    return ConfigKey(name, kind, default, doc, env_names_for(name, namespace), nullable, check)


# (key, repr(value)) of the inert values already warned about in this process.
WARNED: set[tuple[str, str]] = set()


class InertConfigWarning(UserWarning):
    """A config key of Meta's Monarch that has no counterpart here was set to a value other than
    its default: the value is kept and reads back, and nothing else changes."""


def _caller_stacklevel() -> int:
    """The `stacklevel` that points a warning at the first frame outside monarch's config code
    (the user's `configure(...)` or `with configured(...)` line)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (
        "monarch/_src/config/" in frame.f_code.co_filename
        or "monarch/config/" in frame.f_code.co_filename
        or frame.f_code.co_filename.endswith("contextlib.py")
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def inert(name: str, default: object, why: str) -> Callable[[object], object]:
    """The check of an inert key: every value is kept; the first time each value other than
    `default` is set, an `InertConfigWarning` says so with `why` (which says what to use)."""
    if isinstance(default, str) and default and default[0].isdigit():
        default = normalize_duration(default)

    def check(value: object) -> object:
        seen = (name, repr(value))
        if not (value == default and type(value) is type(default)) and seen not in WARNED:
            WARNED.add(seen)
            warnings.warn(
                f"Config key {name!r} is set to {value!r}, which changes nothing in this "
                f"implementation (it is kept and reads back): {why}",
                InertConfigWarning,
                stacklevel=_caller_stacklevel(),
            )
        return value

    check.inert = True  # type: ignore[attr-defined]
    return check


def _inert_key(
    name: str, kind: Kind, default: object, doc: str, namespace: Namespace, why: str
) -> ConfigKey:
    return _key(name, kind, default, f"{doc} Inert: kept and read back, changes nothing. {why}",
                namespace, nullable=default is None, check=inert(name, default, why))


def _congestion(value: object) -> object:
    text = str(value).strip()
    if text and not all(c.isalnum() or c in "_-" for c in text):
        raise ValueError(
            f"Config key 'channel_tcp_congestion' expects the name of a TCP congestion control "
            f"algorithm such as 'cubic', 'reno' or 'bbr' (or '' for the host default), got "
            f"{value!r}."
        )
    return text


def _ibverbs_target(value: object) -> object:
    text = str(value).strip()
    if text.startswith(("cpu:", "gpu:")):
        raise ValueError(
            f"Config key 'rdma_ibverbs_target' cannot be {value!r} here: devices are not chosen "
            f"by NUMA node or GPU. Name the device instead, as 'nic:<name>' (e.g. 'nic:mlx5_0'), "
            f"or leave it '' to use the first device."
        )
    return text


_AFFINITY_WHY = (
    "each process uses one verbs device (rdma_ibverbs_target) and pairs it with the peer's "
    "device, so '', 'any', 'match_name' and 'groups:...' all pair the same way; choose the "
    "local device with rdma_ibverbs_target='nic:<name>'."
)
_affinity_inert = inert("rdma_peer_device_affinity", "", _AFFINITY_WHY)


def _peer_affinity(value: object) -> object:
    """'' / 'any' / 'match_name' / 'groups:a,b|c,d' (device names, ',' within a group, '|'
    between groups); any other text is refused. Inert ('' and 'any' being the default)."""
    text = str(value).strip()
    groups = text.removeprefix("groups:")
    well_formed = text in ("", "any", "match_name") or (
        text.startswith("groups:") and all(
            name.strip() for group in groups.split("|") for name in group.split(",")))
    if not well_formed:
        raise ValueError(
            f"Config key 'rdma_peer_device_affinity' expects '', 'any', 'match_name' or "
            f"'groups:<dev>,<dev>|<dev>,...', got {value!r}."
        )
    return text if text == "any" else _affinity_inert(text)


def _admin_addr(value: object) -> object:
    text = str(value).strip()
    if not text:
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(
            f"Config key 'mesh_admin_addr' expects 'host:port' (e.g. 'localhost:27000' or "
            f"'[::]:1729'), got {value!r}."
        )
    return text


_peer_affinity.inert = True  # type: ignore[attr-defined]


def _pool_bytes(value: object) -> object:
    assert isinstance(value, int)
    if value < 0:
        raise ValueError(
            f"Config key 'recv_buffer_pool_bytes' expects a number of bytes >= 0 (0 turns the "
            f"pool of receive buffers off), got {value!r}."
        )
    return value


def _port_range(value: object) -> object:
    assert isinstance(value, slice)
    start, stop = value.start, 65536 if value.stop is None else value.stop
    if start is None or not 0 < start < stop <= 65536:
        raise ValueError(
            f"Config key 'remote_alloc_allowed_port_range' expects slice(start, stop) with "
            f"0 < start < stop <= 65536 (stop may be omitted), got {value!r}."
        )
    return value


_MAX_TCP_STREAMS = 64  # each stream is a thread and a connection; rdma/tcp.py sizes its pool


def _tcp_streams(value: object) -> object:
    assert isinstance(value, int)
    if not 1 <= value <= _MAX_TCP_STREAMS:
        raise ValueError(
            f"Config key 'rdma_tcp_fallback_parallelism' expects a number of connections from 1 "
            f"to {_MAX_TCP_STREAMS} for one TCP data-plane transfer, got {value!r}."
        )
    return value


def _one_of(key: str, choices: tuple[str, ...], described: str) -> Callable[[object], object]:
    """The check of a key that takes one of `choices` (any case); `described` says what each
    means, in the error."""

    def check(value: object) -> object:
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"Config key '{key}' expects {described}; got {value!r}.")
        return text

    return check


_progress = _one_of(
    "progress", ("auto", "always", "off"),
    "'auto' (show long work, past 0.5 s, on a terminal or in a notebook), 'always' (show every "
    "progress report, in logs too) or 'off'")
_cast_tree = _one_of(
    "cast_tree", ("auto", "always", "off"),
    "'auto' (casts to a proc mesh of 8 procs or more on two or more hosts, not all on this "
    "machine, go through one relay proc per host), 'always' (through the relays even on one "
    "host) or 'off' (one message per rank from the caller)")
_version_check = _one_of(
    "version_check", ("warn", "ignore", "error"),
    "'warn' (warn once per attach when a host's Python, monarch, torch, cloudpickle, numpy or "
    "distributed version differs from the controller's), 'ignore' or 'error' (refuse such a "
    "host)")


_D = Kind.DURATION
_I = Kind.INT
_B = Kind.BOOL
_F = Kind.FLOAT
_S = Kind.STR

_ACKS = ("Delivery is acknowledged by the stream itself (a TCP or unix-domain socket); there is "
         "no message-level acknowledgement to tune. To bound delivery, set "
         "message_delivery_timeout.")
_BATCHING = ("Sends are batched per peer automatically: everything queued during one turn of the "
             "event loop leaves in one write, with no size or age threshold.")
_STATE = ("There is no state query with a timeout here: wait on `initialized` of an actor or proc "
          "mesh, and handle failures with __supervise__ / unhandled_fault_hook.")

_NO_RECONNECT = ("A connection between procs that breaks is not re-established: what waited on "
                 "it fails with a SupervisionError at once.")
_ADMIN = ("The admin server here is the client's control server (`monarch debug`, `stacks`, "
          "`top`, at mesh_admin_addr); it has no such setting. py-spy's timeout is "
          "mesh_admin_pyspy_timeout.")
_SPAWN = "Procs are forked by the host's fork server (the zygote); there is no other launcher."
_TELEMETRY = ("There is no telemetry pipeline to configure: monarch.actor's traced/span/get_meter "
              "use OpenTelemetry whenever a tracer or meter provider is installed.")
# The relay tree (mesh/relay.py) has two levels, host then proc: a fan-out bound would need
# relays that forward to other hosts' relays, a deeper tree with other ordering and failure rules.
_CAST_TREE = ("When casts go through the tree (cast_tree: 'auto' for a proc mesh of 8 procs "
              "or more on two or more hosts not all on this machine, or 'always'), the caller "
              "sends one message to a relay proc on each host and each relay hands it to the "
              "procs of its own host: two levels, so the "
              "fan-out is the number of hosts at the caller and a host's procs at its relay, "
              "with no deeper level to bound. To change how casts travel, set cast_tree ('off': "
              "one message per rank from the caller).")
_VERBS = ("The verbs plane uses one device and one queue pair per peer, with no striping or "
          "tuning; rdma_ibverbs_target picks the device, rdma_max_chunk_size_mb the chunk size.")

_TABLE: tuple[ConfigKey, ...] = (
    # Transport and messaging.
    _key("default_transport", Kind.TRANSPORT, ChannelTransport.TcpWithLocalhost,
         "Transport of this process's listener and of the procs it spawns on its host: "
         "TcpWithLocalhost (the default) loopback TCP; Unix unix-domain sockets (same host "
         "only); TcpWithHostname TCP on this machine's routable address (needed when remote "
         "hosts attach); Tls TCP with mutual TLS; or an explicit 'tcp://host:port' / "
         "'tls://host:port'. (Meta's Monarch defaults to Unix.)", _H),
    _key("codec_max_frame_length", _I, 10 * _GIB,
         "Largest message batch in bytes: a bigger message is refused at the sender with an "
         "error naming this key, and a peer announcing one is disconnected.", _H),
    _key("message_delivery_timeout", _D, "30s",
         "How long an undelivered message may wait before it is reported undeliverable; "
         "connecting to a proc that does not answer is retried this long.", _H),
    _inert_key("message_ack_time_interval", _D, "500ms",
                 "Acknowledge received messages at least this often.", _H, _ACKS),
    _inert_key("message_ack_every_n_messages", _I, 1000,
                 "Acknowledge received messages at least every this many messages.", _H, _ACKS),
    _inert_key("message_ttl_default", _I, 64, "Hop budget of a forwarded message.", _H,
                 "Messages go straight from the sending proc to the receiving proc and are never "
                 "forwarded, so there is no hop budget."),
    _inert_key("split_max_buffer_size", _I, 5,
                 "Frames buffered before a split send is flushed.", _H, _BATCHING),
    _inert_key("split_max_buffer_age", _D, "50ms", "Oldest buffered frame before a flush.", _H,
                 _BATCHING),
    _inert_key("default_encoding", Kind.ENCODING, Encoding.Multipart, "Payload encoding.", _H,
                 "Payloads are always pickled (protocol 5, large buffers out of band); "
                 "Encoding.Multipart, the default, is the only encoding."),
    _inert_key("channel_net_rx_buffer_full_check_interval", _D, "5s",
                 "How often a full receive buffer is re-checked.", _H,
                 "Received batches are read as they arrive; there is no receive buffer to poll."),
    _key("channel_tcp_congestion", _S, "",
         "TCP congestion control algorithm ('cubic', 'reno', 'bbr', ...) set on every TCP "
         "connection between procs; '' keeps the host default. Best effort: an algorithm the "
         "kernel refuses is logged once and the connection keeps the default.", _H,
         check=_congestion),
    _inert_key("message_latency_sampling_rate", _F, 0.01,
                 "Fraction of messages whose latency is recorded.", _H,
                 "No per-message latency is sampled here; `monarch top` shows message rates per "
                 "actor."),
    _inert_key("enable_dest_actor_reordering_buffer", _B, True,
                 "Reorder messages per sender at the destination actor.", _H,
                 "Messages from one sender always arrive in send order (one ordered stream per "
                 "pair of procs), so there is nothing to reorder and it cannot be turned off."),
    _key("small_write_threshold", _I, 64 * 1024,
         "Buffers of arrays, tensors and memoryviews smaller than this many bytes are copied "
         "into the message; larger ones are sent by reference, without a copy (bytes and "
         "bytearray objects go by reference from 64 KiB whatever this says). Meta's Monarch "
         "defaults to 256; 64 KiB is what measured fastest here.", _MESH),
    _key("recv_buffer_pool_bytes", _I, 256 * 1024**2,
         "Bytes of free receive buffers each process keeps mapped for reuse: a message over "
         "256 KiB (a large array or tensor argument) is read from the socket into a pooled, "
         "pre-faulted buffer that becomes the memory of the arrays and tensors built from it, "
         "and goes back to the pool once they are freed. The least recently freed buffers are "
         "unmapped first beyond this bound; 0 turns pooling off (a fresh mapping per "
         "message).", _M, check=_pool_bytes),
    _inert_key("max_cast_dimension_size", _I, 16, "Fan-out of the cast tree per dimension.",
                 _MESH, "Casts are not split along the mesh's dimensions here. " + _CAST_TREE),
    # Lifecycle timeouts.
    _key("host_spawn_ready_timeout", _D, "30s",
         "How long a remote host may take to become ready: a worker's address (a future from "
         "a job) to resolve, a Dask cluster to have a worker, a local worker process to start "
         "listening.", _H),
    _key("process_exit_timeout", _D, "10s",
         "How long procs may take to answer a stop (or a log flush) before it is given up on.",
         _H),
    _key("stop_actor_timeout", _D, "10s",
         "How long a stopping proc waits for its actors to stop (their __cleanup__ included) "
         "before it exits anyway.", _H),
    _key("cleanup_timeout", _D, "3s",
         "How long an actor's __cleanup__ may run before it is cancelled.", _H),
    _key("mesh_proc_spawn_max_idle", _D, "30s",
         "Procs of a new proc mesh that have not reported ready after this long with no other "
         "proc of the mesh becoming ready fail (and are killed).", _MESH),
    _key("mesh_bootstrap_enable_pdeathsig", _B, True,
         "Procs get SIGKILL when their fork server dies (PR_SET_PDEATHSIG); False leaves them "
         "running, to be stopped by mesh_orphan_timeout.", _MESH),
    _key("mesh_terminate_concurrency", _I, 16,
         "Procs of one proc mesh stopped at the same time by ProcMesh.stop / shutdown.", _MESH),
    _key("mesh_terminate_timeout", _D, "10s",
         "How long a proc that was asked to stop may take to exit before it is killed.", _MESH),
    _key("actor_spawn_max_idle", _D, "30s",
         "ActorMesh.initialized fails if its actors have not all finished __init__ within this "
         "long.", _MESH),
    _inert_key("get_actor_state_max_idle", _D, "30s", "Timeout of an actor state query.",
                 _MESH, _STATE),
    _key("proc_stop_max_idle", _D, "30s",
         "How long ProcMesh.stop waits for its procs to answer (actors stopped) before moving on "
         "to mesh_terminate_timeout and SIGKILL.", _MESH),
    _inert_key("get_proc_state_max_idle", _D, "1m", "Timeout of a proc state query.", _MESH,
                 _STATE),
    _inert_key("supervision_watchdog_timeout", _D, "2m",
                 "A reference holder reports its mesh's owner unreachable after this long.",
                 _MESH,
                 "Liveness is checked by heartbeats here: set heartbeat_timeout (procs on this "
                 "host) or host_heartbeat_timeout (remote hosts)."),
    _key("mesh_orphan_timeout", _D, "30s",
         "A proc whose controller has been unreachable this long stops itself.", _MESH),
    _key("mesh_attach_config_timeout", _D, "1m",
         "How long attaching to remote workers may take to exchange config.", _MESH),
    _key("mesh_admin_addr", _S, "",
         "Listen address 'host:port' of the client's control server (`monarch debug`, "
         "`stacks`, `top`); '': MONARCH_DEBUG_SERVER_HOST/PORT or localhost:27000. (Meta's "
         "Monarch defaults to '[::]:1729'; here the server stays on loopback unless asked.)",
         _MESH, check=_admin_addr),
    # Logging.
    _key("enable_log_forwarding", _B, False,
         "Forward child procs' stdout/stderr to the client; True by default under IPython.",
         _MESH),
    _key("enable_file_capture", _B, False,
         "Also append each proc's stdout and stderr to files <tmp>/monarch-<user>/<proc>.stdout "
         "and .stderr (MONARCH_LOG_DIR overrides the folder).", _MESH),
    _key("tail_log_lines", _I, 0,
         "The host of each proc keeps the last this many lines it wrote; a proc that fails has "
         "them appended to its failure report. 0 keeps none.", _MESH),
    _inert_key("read_log_buffer", _I, 100, "Lines buffered per stream by the log forwarder.",
                 _MESH,
                 "Forwarded output is sent as it is read, in chunks, with no line buffer; "
                 "logging_option(aggregate_window_sec=...) collapses repeated lines."),
    _inert_key("force_file_log", _B, False,
                 "Write runtime logs to files even on a terminal.", _MESH,
                 "To keep procs' output in files, set enable_file_capture=True."),
    _key("prefix_with_rank", _B, True,
         "Prefix each line of a proc's output with '[<rank>] ' (its rank in its mesh) in the "
         "files of enable_file_capture and the output tails of failure reports; lines "
         "forwarded to the client are written as the proc wrote them.",
         _MESH),
    _key("prefix_python_logs_with_actor", _B, True,
         "Prefix Python logging records emitted in actors with '[actor=<name>] '.", _M),
    # Remote allocation.
    _inert_key("remote_alloc_bind_to_inaddr_any", _B, False,
                 "Remote allocators listen on all interfaces instead of the hostname.", _H,
                 "Remote hosts' procs listen where host_listen_address says (default: the "
                 "address their client dialed)."),
    _inert_key("remote_alloc_bootstrap_addr", _S, None,
                 "Address remote allocators bootstrap through.", _H,
                 "Remote hosts are reached at the address given to attach_to_workers or "
                 "hosts_from_dask; their procs listen where host_listen_address says."),
    _key("remote_alloc_allowed_port_range", Kind.SLICE, None,
         "Ports a remote host's procs may listen on, as slice(start, stop); None means any. "
         "Set it on the worker (its environment or config file).", _H, nullable=True,
         check=_port_range),
    # RDMA.
    _key("rdma_allow_tcp_fallback", _B, True, "Move RDMA buffers over TCP without ibverbs.", _M),
    _key("rdma_disable_ibverbs", _B, False, "Never use ibverbs, even when present.", _M),
    _key("rdma_max_chunk_size_mb", _I, 512, "Largest chunk of one RDMA transfer, in MiB.", _M),
    _key("rdma_ibverbs_target", _S, "",
         "ibverbs device to use, as 'nic:<name>'; '' picks the first one (a bare name fails when "
         "the RDMA manager starts, as on Monarch). "
         "Choosing by 'cpu:<numa>' or 'gpu:<ordinal>' is refused.", _M, check=_ibverbs_target),
    _key("rdma_peer_device_affinity", _S, "",
         "Which peer devices a local device pairs with: '', 'any', 'match_name' or "
         "'groups:...'. Inert: " + _AFFINITY_WHY, _M, check=_peer_affinity),
    _key("rdma_runtime_worker_threads", _I, 4, "Threads serving RDMA transfers.", _M),
    # Keys of Meta's Monarch 0.7.0 beyond its documented `configure` arguments.
    _key("channel_tcp_keepalive_idle", _D, "1m",
         "TCP connections between procs send keepalive probes after this long idle "
         "(TCP_KEEPIDLE).", _H),
    _inert_key("channel_reconnect_timeout", _D, "1m",
                 "How long a broken channel keeps reconnecting.", _H, _NO_RECONNECT),
    _inert_key("pending_actor_delivery_timeout", _D, "30s",
                 "How long messages wait for an actor that is still being spawned.", _H,
                 "Messages to an actor that is still starting wait in its queue; "
                 "message_delivery_timeout bounds delivery."),
    _inert_key("server_heartbeat_interval", _D, "1s", "Heartbeat of a channel server.", _H,
                 "Set heartbeat_interval (procs on this host) or host_heartbeat_interval "
                 "(remote hosts)."),
    _inert_key("stop_grace_period", _D, "10s", "Grace period of a remote stop.", _H,
                 "Set stop_actor_timeout and mesh_terminate_timeout."),
    _inert_key("terminated_snapshot_retention", _I, 100,
                 "Snapshots of terminated procs kept for the admin server.", _H, _ADMIN),
    _inert_key("sequencer_max_locked_keys", _I, 128, "Keys the message sequencer locks.", _H,
                 "Messages are ordered by one stream per pair of procs; there is no sequencer."),
    _inert_key("max_cast_fanout", _I, 16, "Fan-out of a cast's forwarding tree.", _MESH,
                 _CAST_TREE),
    _inert_key("forwarder_flush_timeout", _D, "5s", "How long a log flush may take.", _MESH,
                 "Log flushes wait process_exit_timeout."),
    _inert_key("file_log_level", _S, "", "Level of the runtime's file log.", _MESH,
                 "Runtime logs go through Python logging; configure it (or set "
                 "ProcMesh.logging_option(level=...))."),
    _inert_key("monarch_log_suffix", _S, "", "Suffix of the runtime's log file names.", _MESH,
                 "There is no runtime log file; enable_file_capture writes procs' output to "
                 "files."),
    _inert_key("proc_launcher_kind", _S, "", "How procs are launched.", _MESH, _SPAWN),
    _inert_key("use_direct_spawn", _B, False, "Spawn procs without a host agent.", _MESH,
                 _SPAWN),
    _inert_key("tokio_worker_threads", _I, None, "Threads of the Rust runtime.", _M,
                 "This implementation has no Rust runtime; each proc runs one asyncio loop."),
    _inert_key("enable_unawaited_python_task_traceback", _B, False,
                 "Tracebacks for unawaited Python tasks.", _M,
                 "Run Python with -X dev (or PYTHONASYNCIODEBUG=1) for asyncio's own reports."),
    _inert_key("process_memory_metric_interval", _D, "5m", "How often memory is sampled.",
                 _MESH, _TELEMETRY),
    _inert_key("enable_otel_tracing", _B, True, "Export traces through OpenTelemetry.", _M,
                 _TELEMETRY),
    _inert_key("enable_otel_metrics", _B, True, "Export metrics through OpenTelemetry.", _M,
                 _TELEMETRY),
    _inert_key("otel_metric_export_interval", _D, "1s", "How often metrics are exported.",
                 _M, _TELEMETRY),
    _inert_key("enable_recorder_tracing", _B, True, "Keep a flight recorder of spans.", _M,
                 _TELEMETRY),
    _inert_key("enable_sqlite_tracing", _B, False, "Write spans to SQLite.", _M, _TELEMETRY),
    _inert_key("scuba_log_enter_exit", _B, False, "Log span enter/exit to Scuba.", _M,
                 _TELEMETRY),
    _key("pyspy_bin", _S, "",
         "The py-spy executable `monarch stacks` runs in the proc being dumped; '' looks for "
         "py-spy on PATH, then next to the interpreter.", _MESH),
    _key("mesh_admin_pyspy_timeout", _D, "10s",
         "How long py-spy may take to dump one proc's stacks (`monarch stacks`).", _MESH),
    _inert_key("mesh_admin_pyspy_bridge_timeout", _D, "13s", "py-spy bridge timeout.", _MESH,
                 _ADMIN),
    _inert_key("mesh_admin_pyspy_client_timeout", _D, "20s", "py-spy client timeout.", _MESH,
                 _ADMIN),
    _inert_key("mesh_admin_pyspy_max_profile_duration", _D, "5m",
                 "Longest py-spy profile.", _MESH, _ADMIN),
    _inert_key("mesh_admin_config_dump_bridge_timeout", _D, "5s", "Config dump timeout.",
                 _MESH, _ADMIN),
    _inert_key("mesh_admin_max_concurrent_resolves", _I, 2, "Concurrent admin resolves.",
                 _MESH, _ADMIN),
    _inert_key("mesh_admin_query_child_timeout", _D, "100ms", "Admin child query timeout.",
                 _MESH, _ADMIN),
    _inert_key("mesh_admin_resolve_actor_timeout", _D, "200ms",
                 "Admin actor resolution timeout.", _MESH, _ADMIN),
    _inert_key("mesh_admin_single_host_timeout", _D, "3s", "Admin per-host query timeout.",
                 _MESH, _ADMIN),
    _inert_key("mesh_admin_tree_timeout", _D, "10s", "Admin tree query timeout.", _MESH,
                 _ADMIN),
    _inert_key("rdma_cq_poller_per_device", _B, True, "One completion poller per device.",
                 _M, _VERBS),
    _inert_key("rdma_host_odp", _B, False, "On-demand paging for host memory.", _M, _VERBS),
    _inert_key("rdma_max_nics_per_buffer", _I, None, "NICs a buffer is registered on.", _M,
                 _VERBS),
    _inert_key("rdma_min_stripe_size_kb", _I, 512, "Smallest stripe of a transfer.", _M,
                 _VERBS),
    _inert_key("rdma_qp_init_timeout", _D, "30s", "Queue pair setup timeout.", _M, _VERBS),
    _inert_key("rdma_qps_per_cq", _I, 64, "Queue pairs per completion queue.", _M, _VERBS),
    _inert_key("rdma_qps_per_peer", _I, 4, "Queue pairs per peer.", _M, _VERBS),
    _key("rdma_tcp_fallback_parallelism", _I, 4,
         "Connections one transfer of 8 MiB or more over the TCP data plane uses at the same "
         "time: the transfer is cut into this many equal pieces, each moved on its own "
         "connection (1: one connection; smaller transfers always take one). At most 64. "
         "(Meta's Monarch defaults to 1; 4 is what this plane used before the key acted, and "
         "measured no slower on one host.)", _M, check=_tcp_streams),
    # Monarch-specific runtime keys.
    _key("heartbeat_interval", _D, "1s", "How often a proc tells its controller it is alive.", _M),
    _key("heartbeat_timeout", _D, "10s",
         "A peer silent for this long is considered unreachable.", _M),
    _key("enable_tls", _B, False, "Use TLS for tcp transports (needs the tls_* files).", _M),
    _key("tls_ca_file", _S, "", "PEM file of the certificate authority to trust.", _M),
    _key("tls_cert_file", _S, "", "PEM certificate presented by this process.", _M),
    _key("tls_key_file", _S, "", "PEM private key of tls_cert_file.", _M),
    # Hosts and Dask clusters
    _key("host_heartbeat_interval", _D, "1s",
         "How often a client pings each attached remote host (and a host its client).", _M),
    _key("host_heartbeat_timeout", _D, "10s",
         "A remote host (or a host's client) silent this long is lost; its procs fail.", _M),
    _key("host_listen_address", _S, None,
         "Where a remote host's procs listen ('tcp://ip:0'); None: the address its client dialed.",
         _M, nullable=True),
    _key("version_check", _S, "warn",
         "When attached hosts' Python, monarch, torch, cloudpickle, numpy or distributed "
         "versions differ from the controller's: 'warn' (once per attach, with a table), "
         "'ignore', or 'error' (the host is not attached; HostMesh.initialized raises).", _M,
         check=_version_check),
    _key("progress", _S, "auto",
         "Progress reports of long work (procs coming up, job bring-up, workspace sync, RDMA "
         "transfers of 64 MiB or more): 'auto' shows work still running after 0.5 s on a "
         "terminal or in a notebook cell, in the user's process only; 'always' shows every "
         "report from its start (in procs and logs too); 'off' shows none.", _M,
         check=_progress),
    _key("cast_tree", _S, "auto",
         "How a call reaches the actors of a mesh: 'auto' sends, when its proc mesh spans two "
         "or more hosts, one message per host to a relay proc there (the host's lowest live "
         "rank), which hands the call to that host's procs and sends back their replies to a "
         "call() as one batch; every call from this process to that mesh's actors on a host "
         "goes through its relay, so their order is kept. 'always': through the relays even "
         "on one host. 'off': one message per rank, straight from the caller.", _M,
         check=_cast_tree),
    # Tensor engine
    _key("tensor_engine_timeout", _D, "5m",
         "Longest a tensor-engine worker waits on a collective, a store or an actor result.", _M),
)

KEYS: dict[str, ConfigKey] = {key.name: key for key in _TABLE}

# Keys of Meta's Monarch with no counterpart here (see `inert`).
INERT: frozenset[str] = frozenset(
    key.name for key in _TABLE if getattr(key.check, "inert", False)
)


def unknown_key_error(name: str) -> ValueError:
    """The error for a key that is not registered, with the closest registered names."""
    import difflib  # Only needed on this error path; keeps `import monarch.config` light.

    close = difflib.get_close_matches(name, KEYS, n=3, cutoff=0.6)
    if close:
        hint = " or ".join(repr(candidate) for candidate in close)
        advice = f"Did you mean {hint}?"
    else:
        advice = "See monarch.config.get_global_config() for every valid key."
    return ValueError(f"Unknown config key {name!r}. {advice}")


def lookup(name: str) -> ConfigKey:
    """Return the registered key named `name`; ValueError with suggestions otherwise."""
    try:
        return KEYS[name]
    except KeyError:
        raise unknown_key_error(name) from None
