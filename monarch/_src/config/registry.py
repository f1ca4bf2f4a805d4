"""Every config key this implementation knows, with its kind, default and meaning.

The table is the single source of truth: the default layer, the environment layer (via each key's
environment names), validation and `get_global_config()`'s key set are all derived from it. Keys
marked "accepted and round-tripped" exist for compatibility with Meta's Monarch and do not (yet)
change behaviour here.
"""

from __future__ import annotations

from monarch._src.config.duration import normalize_duration
from monarch._src.config.encoding import Encoding
from monarch._src.config.spec import ConfigKey, Kind, Namespace, env_names_for
from monarch._src.config.transport import ChannelTransport

__all__ = ["KEYS", "lookup", "unknown_key_error"]

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
) -> ConfigKey:
    if kind is Kind.DURATION and isinstance(default, str):
        default = normalize_duration(default)
    return ConfigKey(name, kind, default, doc, env_names_for(name, namespace), nullable)


_D = Kind.DURATION
_I = Kind.INT
_B = Kind.BOOL
_F = Kind.FLOAT
_S = Kind.STR

_TABLE: tuple[ConfigKey, ...] = (
    # Transport and messaging.
    _key("default_transport", Kind.TRANSPORT, ChannelTransport.Unix,
         "Transport for new procs: a ChannelTransport or an explicit 'tcp://host:port'.", _H),
    _key("codec_max_frame_length", _I, 10 * _GIB,
         "Largest message frame in bytes; a bigger message fails delivery.", _H),
    _key("message_delivery_timeout", _D, "30s",
         "How long an undelivered message may wait before it is reported undeliverable.", _H),
    _key("message_ack_time_interval", _D, "500ms",
         "Acknowledge received messages at least this often.", _H),
    _key("message_ack_every_n_messages", _I, 1000,
         "Acknowledge received messages at least every this many messages.", _H),
    _key("message_ttl_default", _I, 64, "Hop budget of a forwarded message.", _H),
    _key("split_max_buffer_size", _I, 5, "Frames buffered before a split send is flushed.", _H),
    _key("split_max_buffer_age", _D, "50ms", "Oldest buffered frame before a flush.", _H),
    _key("default_encoding", Kind.ENCODING, Encoding.Multipart,
         "Payload encoding (accepted and round-tripped; payloads are pickled).", _H),
    _key("channel_net_rx_buffer_full_check_interval", _D, "5s",
         "How often a full receive buffer is re-checked.", _H),
    _key("channel_tcp_congestion", _B, False,
         "Leave Nagle's algorithm on for TCP channels (accepted and round-tripped).", _H),
    _key("message_latency_sampling_rate", _F, 0.01,
         "Fraction of messages whose latency is recorded.", _H),
    _key("enable_dest_actor_reordering_buffer", _B, True,
         "Reorder messages per sender at the destination actor.", _H),
    _key("small_write_threshold", _I, 256,
         "Payloads up to this many bytes are copied into the frame instead of sent by reference.",
         _MESH),
    _key("max_cast_dimension_size", _I, 16,
         "Fan-out of the cast tree per dimension.", _MESH),
    # Lifecycle timeouts.
    _key("host_spawn_ready_timeout", _D, "30s",
         "How long a new host may take to report ready.", _H),
    _key("process_exit_timeout", _D, "10s",
         "How long a stopping proc may take to exit before it is killed.", _H),
    _key("stop_actor_timeout", _D, "10s", "How long a graceful actor stop may take.", _H),
    _key("cleanup_timeout", _D, "3s",
         "How long an actor's __cleanup__ may run before it is cancelled.", _H),
    _key("mesh_proc_spawn_max_idle", _D, "30s",
         "How long proc spawning may go without progress before it fails.", _MESH),
    _key("mesh_bootstrap_enable_pdeathsig", _B, True,
         "Child procs get SIGKILL when their parent host agent dies.", _MESH),
    _key("mesh_terminate_concurrency", _I, 16, "Procs terminated in parallel on shutdown.", _MESH),
    _key("mesh_terminate_timeout", _D, "10s",
         "How long terminating one proc may take before it is killed.", _MESH),
    _key("actor_spawn_max_idle", _D, "30s",
         "How long actor spawning may go without progress before it fails.", _MESH),
    _key("get_actor_state_max_idle", _D, "30s", "Timeout of an actor state query.", _MESH),
    _key("proc_stop_max_idle", _D, "30s",
         "How long stopping a proc mesh may go without progress before it fails.", _MESH),
    _key("get_proc_state_max_idle", _D, "1m", "Timeout of a proc state query.", _MESH),
    _key("supervision_watchdog_timeout", _D, "2m",
         "A reference holder reports its mesh's owner unreachable after this long.", _MESH),
    _key("mesh_orphan_timeout", _D, "30s",
         "A proc whose controller has been unreachable this long stops itself.", _MESH),
    _key("mesh_attach_config_timeout", _D, "1m",
         "How long attaching to remote workers may take to exchange config.", _MESH),
    _key("mesh_admin_addr", _S, None,
         "Listen address of the mesh admin endpoint; None means no admin endpoint.", _MESH,
         nullable=True),
    # Logging.
    _key("enable_log_forwarding", _B, False,
         "Forward child procs' stdout/stderr to the client; True by default under IPython.",
         _MESH),
    _key("enable_file_capture", _B, False, "Also write child procs' output to files.", _MESH),
    _key("tail_log_lines", _I, 0, "Lines of a failed proc's output kept for its report.", _MESH),
    _key("read_log_buffer", _I, 100, "Lines buffered per stream by the log forwarder.", _MESH),
    _key("force_file_log", _B, False, "Write runtime logs to files even on a terminal.", _MESH),
    _key("prefix_with_rank", _B, True, "Prefix forwarded output lines with the proc rank.", _MESH),
    _key("prefix_python_logs_with_actor", _B, True,
         "Prefix Python logging records emitted in actors with '[actor=<name>] '.", _M),
    # Remote allocation.
    _key("remote_alloc_bind_to_inaddr_any", _B, False,
         "Remote allocators listen on all interfaces instead of the hostname.", _H),
    _key("remote_alloc_bootstrap_addr", _S, None,
         "Address remote allocators bootstrap through; None means derive it.", _H, nullable=True),
    _key("remote_alloc_allowed_port_range", Kind.SLICE, None,
         "Ports remote allocators may listen on, as slice(start, stop); None means any.", _H,
         nullable=True),
    # RDMA.
    _key("rdma_allow_tcp_fallback", _B, True, "Move RDMA buffers over TCP without ibverbs.", _M),
    _key("rdma_disable_ibverbs", _B, False, "Never use ibverbs, even when present.", _M),
    _key("rdma_max_chunk_size_mb", _I, 512, "Largest chunk of one RDMA transfer, in MiB.", _M),
    _key("rdma_ibverbs_target", _S, None,
         "ibverbs device to use; None means pick automatically.", _M, nullable=True),
    _key("rdma_peer_device_affinity", _B, False,
         "Prefer the RDMA device closest to the peer's GPU.", _M),
    _key("rdma_runtime_worker_threads", _I, 4, "Threads serving RDMA transfers.", _M),
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
    # Tensor engine
    _key("tensor_engine_timeout", _D, "5m",
         "Longest a tensor-engine worker waits on a collective, a store or an actor result.", _M),
)

KEYS: dict[str, ConfigKey] = {key.name: key for key in _TABLE}


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
