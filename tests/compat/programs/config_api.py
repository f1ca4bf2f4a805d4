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


def error_type(fn, *args, **kwargs) -> str:
    """Only the exception's type: the two implementations word their messages differently."""
    return outcome(fn, *args, **kwargs).partition(":")[0]


def main() -> None:
    merged = get_global_config()
    check("global config is a dict", type(merged).__name__)
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
