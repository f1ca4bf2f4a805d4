"""The configuration API: `monarch.config.configure`, `configured`, `get_global_config`,
`get_runtime_config`, `clear_runtime_config`, and `monarch.actor.enable_transport`.

Follows the docstrings of `monarch.config` in Monarch's API reference (runtime configuration
layers, humantime durations, the `configured` context manager for tests) and the getting-started
note on choosing a transport before anything else. Only behaviours both implementations share
are printed: what is accepted, what reads back, which errors (by type) bad values raise.
"""

from __future__ import annotations

from compat import check, outcome

from monarch.config import (
    Encoding,
    clear_runtime_config,
    configure,
    configured,
    get_global_config,
    get_runtime_config,
)

# Every key torchmonarch 0.7.0's get_global_config() lists.
KEYS_0_7_0 = [
    "actor_spawn_max_idle",
    "channel_net_rx_buffer_full_check_interval",
    "channel_reconnect_timeout",
    "channel_tcp_congestion",
    "channel_tcp_keepalive_idle",
    "cleanup_timeout",
    "codec_max_frame_length",
    "default_encoding",
    "default_transport",
    "enable_dest_actor_reordering_buffer",
    "enable_file_capture",
    "enable_log_forwarding",
    "enable_otel_metrics",
    "enable_otel_tracing",
    "enable_recorder_tracing",
    "enable_sqlite_tracing",
    "enable_unawaited_python_task_traceback",
    "file_log_level",
    "force_file_log",
    "forwarder_flush_timeout",
    "get_actor_state_max_idle",
    "get_proc_state_max_idle",
    "host_spawn_ready_timeout",
    "max_cast_dimension_size",
    "max_cast_fanout",
    "mesh_admin_addr",
    "mesh_admin_config_dump_bridge_timeout",
    "mesh_admin_max_concurrent_resolves",
    "mesh_admin_pyspy_bridge_timeout",
    "mesh_admin_pyspy_client_timeout",
    "mesh_admin_pyspy_max_profile_duration",
    "mesh_admin_pyspy_timeout",
    "mesh_admin_query_child_timeout",
    "mesh_admin_resolve_actor_timeout",
    "mesh_admin_single_host_timeout",
    "mesh_admin_tree_timeout",
    "mesh_attach_config_timeout",
    "mesh_bootstrap_enable_pdeathsig",
    "mesh_orphan_timeout",
    "mesh_proc_spawn_max_idle",
    "mesh_terminate_concurrency",
    "mesh_terminate_timeout",
    "message_ack_every_n_messages",
    "message_ack_time_interval",
    "message_delivery_timeout",
    "message_latency_sampling_rate",
    "message_ttl_default",
    "monarch_log_suffix",
    "otel_metric_export_interval",
    "pending_actor_delivery_timeout",
    "prefix_with_rank",
    "proc_launcher_kind",
    "proc_stop_max_idle",
    "process_exit_timeout",
    "process_memory_metric_interval",
    "pyspy_bin",
    "rdma_allow_tcp_fallback",
    "rdma_cq_poller_per_device",
    "rdma_disable_ibverbs",
    "rdma_host_odp",
    "rdma_ibverbs_target",
    "rdma_max_chunk_size_mb",
    "rdma_max_nics_per_buffer",
    "rdma_min_stripe_size_kb",
    "rdma_peer_device_affinity",
    "rdma_qp_init_timeout",
    "rdma_qps_per_cq",
    "rdma_qps_per_peer",
    "rdma_runtime_worker_threads",
    "rdma_tcp_fallback_parallelism",
    "read_log_buffer",
    "scuba_log_enter_exit",
    "sequencer_max_locked_keys",
    "server_heartbeat_interval",
    "small_write_threshold",
    "split_max_buffer_age",
    "split_max_buffer_size",
    "stop_actor_timeout",
    "stop_grace_period",
    "supervision_watchdog_timeout",
    "tail_log_lines",
    "terminated_snapshot_retention",
    "tokio_worker_threads",
    "use_direct_spawn",
]


def error_type(fn, *args, **kwargs) -> str:
    """Only the exception's type: the two implementations word their messages differently."""
    return outcome(fn, *args, **kwargs).partition(":")[0]


def main() -> None:
    merged = get_global_config()
    check("global config is a dict", type(merged).__name__)
    check("every 0.7.0 key is listed", [key for key in KEYS_0_7_0 if key not in merged])
    check("every 0.7.0 key accepts its own default",
          outcome(configure, **{key: merged[key] for key in KEYS_0_7_0
                                if key != "default_transport"}))
    clear_runtime_config()
    defaults = ["enable_log_forwarding", "enable_file_capture", "tail_log_lines",
                "codec_max_frame_length", "message_delivery_timeout", "process_exit_timeout",
                "stop_actor_timeout", "cleanup_timeout", "mesh_terminate_concurrency",
                "mesh_terminate_timeout", "prefix_with_rank", "rdma_allow_tcp_fallback",
                "rdma_disable_ibverbs", "rdma_runtime_worker_threads", "message_ttl_default",
                "default_encoding", "channel_tcp_congestion", "rdma_ibverbs_target"]
    check("documented defaults", [(key, merged[key]) for key in defaults])

    configure(tail_log_lines=3)
    check("configure then read back", get_global_config()["tail_log_lines"])
    check("runtime layer holds it", get_runtime_config()["tail_log_lines"])

    configure(cleanup_timeout="90s")
    check("duration 90s normalised", get_global_config()["cleanup_timeout"])
    configure(cleanup_timeout="300s")
    check("duration 300s normalised", get_global_config()["cleanup_timeout"])
    configure(cleanup_timeout="1h30m")
    check("duration 1h30m normalised", get_global_config()["cleanup_timeout"])

    clear_runtime_config()
    check("clear restores defaults", (get_global_config()["tail_log_lines"],
                                      get_global_config()["cleanup_timeout"]))

    copy = get_global_config()
    copy["tail_log_lines"] = 99
    check("mutating the copy changes nothing", get_global_config()["tail_log_lines"])

    with configured(tail_log_lines=5, enable_file_capture=True) as inside:
        check("configured yields merged", (inside["tail_log_lines"],
                                           inside["enable_file_capture"]))
        check("configured applies", get_global_config()["tail_log_lines"])
    check("configured restores", (get_global_config()["tail_log_lines"],
                                  get_global_config()["enable_file_capture"]))
    try:
        with configured(tail_log_lines=7):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    check("configured restores after an exception", get_global_config()["tail_log_lines"])

    check("unknown key", error_type(configure, bogus_key=1))
    check("int key given a str", error_type(configure, tail_log_lines="x"))
    check("bool key given an int", error_type(configure, enable_log_forwarding=1))
    check("duration given an int", error_type(configure, cleanup_timeout=5))
    check("duration without a unit", error_type(configure, cleanup_timeout="30"))
    check("duration format error names it",
          "Invalid duration format" in outcome(configure, cleanup_timeout="abc"))
    check("encoding given a str", error_type(configure, default_encoding="json"))
    check("str key given a bool", error_type(configure, channel_tcp_congestion=True))
    check("str key given None", error_type(configure, rdma_ibverbs_target=None))
    check("a failed configure changes nothing", get_global_config()["cleanup_timeout"])

    configure(channel_tcp_congestion="cubic", small_write_threshold=1024)
    check("str and int keys read back", (get_global_config()["channel_tcp_congestion"],
                                         get_global_config()["small_write_threshold"]))
    configure(message_ttl_default=64, default_encoding=Encoding.Multipart)
    check("defaults may be set explicitly", (get_global_config()["message_ttl_default"],
                                             get_global_config()["default_encoding"]))
    check("encoding members", [Encoding.Bincode, Encoding.Json, Encoding.Multipart])
    clear_runtime_config()

    check("transport tcp accepted", outcome(configure, default_transport="tcp"))
    check("transport explicit address accepted",
          outcome(configure, default_transport="tcp://127.0.0.1:0"))
    check("transport metatls", error_type(configure, default_transport="metatls"))
    check("transport bogus", error_type(configure, default_transport="bogus"))
    check("transport of the wrong type", error_type(configure, default_transport=5))
    clear_runtime_config()

    from monarch.actor import enable_transport

    check("enable_transport bogus", error_type(enable_transport, "bogus"))
    check("enable_transport wrong type", error_type(enable_transport, 5))
    check("enable_transport ipc", outcome(enable_transport, "ipc"))


if __name__ == "__main__":
    main()
