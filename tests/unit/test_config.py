"""Tests of monarch.config: layers, validation, durations, transports and the pytest helpers."""

from __future__ import annotations

import asyncio
import inspect
import os
import pickle
import sys
import threading
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import monarch.config
from monarch._src import config as internal
from monarch._src.config import registry, sources
from monarch._src.config.duration import format_duration, parse_duration
from monarch._src.config.registry import INERT, KEYS, InertConfigWarning
from monarch._src.config.spec import ConfigKey, Kind
from monarch._src.config.validate import check_value
from monarch.config import (
    ChannelTransport,
    Encoding,
    clear_runtime_config,
    configure,
    configured,
    get_global_config,
    get_runtime_config,
    parametrize_config,
    parametrize_config_pointwise,
)

_OUR_PREFIXES = ("HYPERACTOR_", "MONARCH_")


@pytest.fixture(autouse=True)
def isolated_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from defaults only: no monarch env vars, no file, empty runtime layer."""
    saved = internal.runtime_snapshot()
    for var in list(os.environ):
        if var.startswith(_OUR_PREFIXES):
            monkeypatch.delenv(var)
    clear_runtime_config()
    internal.reload()
    yield
    monkeypatch.undo()
    internal.reload()
    internal.apply_snapshot(saved)


# -- public surface -------------------------------------------------------------------------


def test_facade_all_matches_contract() -> None:
    assert sorted(monarch.config.__all__) == sorted(
        [
            "clear_runtime_config",
            "configure",
            "configured",
            "Encoding",
            "get_global_config",
            "get_runtime_config",
            "parametrize_config",
            "parametrize_config_pointwise",
        ]
    )
    assert monarch.config.ChannelTransport is ChannelTransport


# -- defaults -------------------------------------------------------------------------------

_PINNED_DEFAULTS: dict[str, object] = {
    "default_transport": ChannelTransport.TcpWithLocalhost,
    "enable_log_forwarding": False,
    "enable_file_capture": False,
    "tail_log_lines": 0,
    "codec_max_frame_length": 10 * 1024**3,
    "message_delivery_timeout": "30s",
    "host_spawn_ready_timeout": "30s",
    "mesh_proc_spawn_max_idle": "30s",
    "process_exit_timeout": "10s",
    "message_ack_time_interval": "500ms",
    "message_ack_every_n_messages": 1000,
    "message_ttl_default": 64,
    "split_max_buffer_size": 5,
    "split_max_buffer_age": "50ms",
    "stop_actor_timeout": "10s",
    "cleanup_timeout": "3s",
    "default_encoding": Encoding.Multipart,
    "channel_net_rx_buffer_full_check_interval": "5s",
    "channel_tcp_congestion": "",
    "message_latency_sampling_rate": 0.01,
    "enable_dest_actor_reordering_buffer": True,
    "mesh_bootstrap_enable_pdeathsig": True,
    "mesh_terminate_concurrency": 16,
    "mesh_terminate_timeout": "10s",
    "small_write_threshold": 64 * 1024,
    "recv_buffer_pool_bytes": 256 * 1024**2,
    "max_cast_dimension_size": 16,
    "remote_alloc_bind_to_inaddr_any": False,
    "remote_alloc_bootstrap_addr": None,
    "remote_alloc_allowed_port_range": None,
    "read_log_buffer": 100,
    "force_file_log": False,
    "prefix_with_rank": True,
    "actor_spawn_max_idle": "30s",
    "get_actor_state_max_idle": "30s",
    "supervision_watchdog_timeout": "2m",
    "proc_stop_max_idle": "30s",
    "get_proc_state_max_idle": "1m",
    "mesh_admin_addr": "",
    "mesh_attach_config_timeout": "1m",
    "mesh_orphan_timeout": "30s",
    "rdma_allow_tcp_fallback": True,
    "rdma_disable_ibverbs": False,
    "rdma_max_chunk_size_mb": 512,
    "rdma_ibverbs_target": "",
    "rdma_peer_device_affinity": "",
    "rdma_runtime_worker_threads": 4,
    "heartbeat_interval": "1s",
    "heartbeat_timeout": "10s",
    "tls_ca_file": "",
    "tls_cert_file": "",
    "tls_key_file": "",
    "host_heartbeat_interval": "1s",
    "host_heartbeat_timeout": "10s",
    "host_listen_address": None,
    "version_check": "warn",
    "progress": "auto",
    "cast_tree": "auto",
    "tensor_engine_timeout": "5m",
    "enable_tls": False,
    "prefix_python_logs_with_actor": True,
    "channel_tcp_keepalive_idle": '1m',
    "channel_reconnect_timeout": '1m',
    "pending_actor_delivery_timeout": '30s',
    "server_heartbeat_interval": '1s',
    "stop_grace_period": '10s',
    "terminated_snapshot_retention": 100,
    "sequencer_max_locked_keys": 128,
    "max_cast_fanout": 16,
    "forwarder_flush_timeout": '5s',
    "file_log_level": '',
    "monarch_log_suffix": '',
    "proc_launcher_kind": '',
    "use_direct_spawn": False,
    "tokio_worker_threads": None,
    "enable_unawaited_python_task_traceback": False,
    "process_memory_metric_interval": '5m',
    "enable_otel_tracing": True,
    "enable_otel_metrics": True,
    "otel_metric_export_interval": '1s',
    "enable_recorder_tracing": True,
    "enable_sqlite_tracing": False,
    "scuba_log_enter_exit": False,
    "pyspy_bin": '',
    "mesh_admin_pyspy_timeout": '10s',
    "mesh_admin_pyspy_bridge_timeout": '13s',
    "mesh_admin_pyspy_client_timeout": '20s',
    "mesh_admin_pyspy_max_profile_duration": '5m',
    "mesh_admin_config_dump_bridge_timeout": '5s',
    "mesh_admin_max_concurrent_resolves": 2,
    "mesh_admin_query_child_timeout": '100ms',
    "mesh_admin_resolve_actor_timeout": '200ms',
    "mesh_admin_single_host_timeout": '3s',
    "mesh_admin_tree_timeout": '10s',
    "rdma_cq_poller_per_device": True,
    "rdma_host_odp": False,
    "rdma_max_nics_per_buffer": None,
    "rdma_min_stripe_size_kb": 512,
    "rdma_qp_init_timeout": '30s',
    "rdma_qps_per_cq": 64,
    "rdma_qps_per_peer": 4,
    "rdma_tcp_fallback_parallelism": 4,  # Monarch: 1 (registry.py says why)
}


def test_defaults_fresh_process_match_contract() -> None:
    assert get_global_config() == _PINNED_DEFAULTS
    assert get_runtime_config() == {}


def test_defaults_under_ipython_enable_log_forwarding(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("IPython")
    monkeypatch.setattr(fake, "get_ipython", lambda: object(), raising=False)
    monkeypatch.setitem(sys.modules, "IPython", fake)
    internal.reload()
    assert internal.get("enable_log_forwarding") is True
    monkeypatch.setenv("HYPERACTOR_MESH_ENABLE_LOG_FORWARDING", "false")
    internal.reload()
    assert internal.get("enable_log_forwarding") is False


# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("300s", "5m"),
        ("90s", "1m 30s"),
        ("1h30m", "1h 30m"),
        ("1h 30m", "1h 30m"),
        ("500ms", "500ms"),
        ("2m", "2m"),
        ("10s", "10s"),
        ("0s", "0s"),
        ("1500ms", "1s 500ms"),
        ("2 min", "2m"),
        ("1sec", "1s"),
        ("48h", "2days"),
        ("1d", "1day"),
        ("1000000ns", "1ms"),
    ],
)
def test_duration_written_form_reads_back_canonical(written: str, canonical: str) -> None:
    configure(message_delivery_timeout=written)
    assert get_global_config()["message_delivery_timeout"] == canonical
    assert get_runtime_config()["message_delivery_timeout"] == canonical


@pytest.mark.parametrize("bad", ["30", "abc", "", "   ", "1.5s", "-1s", "10 parsecs", "s10", "1H"])
def test_duration_malformed_string_raises_type_error(bad: str) -> None:
    with pytest.raises(TypeError, match="Invalid duration format"):
        configure(cleanup_timeout=bad)
    assert internal.get("cleanup_timeout") == "3s"


def test_duration_non_string_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"'cleanup_timeout' expects str.*got int"):
        configure(cleanup_timeout=30)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
@given(st.integers(min_value=0, max_value=10**20))
def test_duration_any_nanoseconds_round_trips_exactly(nanoseconds: int) -> None:
    assert parse_duration(format_duration(nanoseconds)) == nanoseconds


def test_duration_seconds_after_configure_reflects_new_value() -> None:
    assert internal.duration_seconds("message_ack_time_interval") == 0.5
    configure(cleanup_timeout="1m 30s")
    assert internal.duration_seconds("cleanup_timeout") == 90.0


def test_duration_seconds_non_duration_key_raises_type_error() -> None:
    with pytest.raises(TypeError, match="'tail_log_lines' is not a duration"):
        internal.duration_seconds("tail_log_lines")


# -- unknown keys and wrong types -----------------------------------------------------------


def test_configure_unknown_key_raises_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="does_not_exist"):
        configure(does_not_exist=42)
    with pytest.raises(ValueError, match="does_not_exist"), configured(does_not_exist=42):
        pytest.fail("The block must not run.")


def test_configure_misspelt_key_suggests_close_match() -> None:
    with pytest.raises(ValueError, match="Did you mean 'cleanup_timeout'"):
        configure(cleanup_timout="1s")


def test_get_unknown_key_raises_value_error() -> None:
    with pytest.raises(ValueError, match="Unknown config key 'nope'"):
        internal.get("nope")


@pytest.mark.parametrize(
    ("key", "value", "expected", "got"),
    [
        ("tail_log_lines", "5", "int", "str"),
        ("tail_log_lines", True, "int", "bool"),
        ("tail_log_lines", 5.0, "int", "float"),
        ("tail_log_lines", None, "int", "NoneType"),
        ("enable_file_capture", 1, "bool", "int"),
        ("enable_file_capture", "true", "bool", "str"),
        ("message_latency_sampling_rate", "0.1", "float", "str"),
        ("message_latency_sampling_rate", True, "float", "bool"),
        ("default_encoding", "Json", "Encoding", "str"),
        ("default_transport", 5, "ChannelTransport or str", "int"),
        ("tls_ca_file", 5, "str", "int"),
        ("mesh_admin_addr", 5, "str", "int"),
        ("mesh_admin_addr", None, "str", "NoneType"),
        ("rdma_ibverbs_target", None, "str", "NoneType"),
        ("channel_tcp_congestion", True, "str", "bool"),
        ("remote_alloc_allowed_port_range", (1, 2), "slice", "tuple"),
    ],
)
def test_configure_wrong_type_raises_type_error_naming_key_and_types(
    key: str, value: object, expected: str, got: str
) -> None:
    with pytest.raises(TypeError) as info:
        configure(**{key: value})
    message = str(info.value)
    assert f"{key!r}" in message
    assert f"expects {expected}" in message
    assert f"got {got}" in message


def test_configure_slice_with_step_raises_type_error() -> None:
    with pytest.raises(TypeError, match="no step"):
        configure(remote_alloc_allowed_port_range=slice(1, 10, 2))


def test_configure_int_for_float_key_stores_float() -> None:
    key = ConfigKey("rate", Kind.FLOAT, 0.5, "A float key.", ("MONARCH_RATE",))
    value = check_value(key, 1)
    assert value == 1.0 and isinstance(value, float)


def test_configure_one_bad_value_changes_nothing() -> None:
    with pytest.raises(TypeError):
        configure(cleanup_timeout="1s", tail_log_lines="x")
    assert get_runtime_config() == {}


def test_configure_none_on_nullable_key_is_accepted() -> None:
    configure(host_listen_address="tcp://10.0.0.1:0")
    configure(host_listen_address=None)
    assert internal.get("host_listen_address") is None


_SAMPLES: dict[str, object] = {
    "channel_tcp_congestion": "reno",
    "mesh_admin_addr": "localhost:1729",
    "rdma_peer_device_affinity": "any",
    "rdma_ibverbs_target": "nic:mlx5_0",
    "version_check": "ignore",
    "progress": "off",
    "cast_tree": "off",
}


def _sample_value(key: ConfigKey) -> object:
    """A valid value different from the default, for every kind."""
    if key.name in _SAMPLES:
        return _SAMPLES[key.name]
    match key.kind:
        case Kind.DURATION:
            return "1m 30s"
        case Kind.INT:
            return 7
        case Kind.BOOL:
            return not key.default
        case Kind.FLOAT:
            return 0.5
        case Kind.STR:
            return "some-value"
        case Kind.ENCODING:
            return Encoding.Json
        case Kind.TRANSPORT:
            return ChannelTransport.TcpWithHostname
        case Kind.SLICE:
            return slice(26600, 26610)


@pytest.mark.parametrize("name", sorted(set(KEYS) - INERT))
def test_configure_every_key_round_trips(name: str) -> None:
    value = _sample_value(KEYS[name])
    assert value != KEYS[name].default
    configure(**{name: value})
    assert get_global_config()[name] == value
    assert get_runtime_config() == {name: value}


# -- transports -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "member"),
    [
        ("tcp", ChannelTransport.TcpWithHostname),
        ("tcp-localhost", ChannelTransport.TcpWithLocalhost),
        ("ipc", ChannelTransport.Unix),
        ("unix", ChannelTransport.Unix),
        ("tls", ChannelTransport.Tls),
    ],
)
def test_transport_keyword_maps_to_member(text: str, member: ChannelTransport) -> None:
    assert internal.parse_transport(text) is member
    configure(default_transport=text)
    assert internal.get("default_transport") is member


@pytest.mark.parametrize("address", ["tcp://localhost:1234", "tls://10.0.0.1:0", "tcp://[::1]:80",
                                     "unix:///tmp/monarch.sock"])
def test_transport_explicit_address_kept_as_string(address: str) -> None:
    assert internal.parse_transport(address) == address
    with configured(default_transport=address) as merged:
        assert merged["default_transport"] == address


@pytest.mark.parametrize(
    "bad",
    ["bogus", "", "http://host:1", "tcp://host", "tcp://:80", "tcp://host:99999", "tcp://::1:80",
     "unix://@abstract", "unix://relative/path"],
)
def test_transport_invalid_string_raises_value_error_listing_forms(bad: str) -> None:
    with pytest.raises(ValueError, match="'tcp-localhost', 'ipc', 'unix'") as info:
        internal.parse_transport(bad)
    assert repr(bad) in str(info.value)
    with pytest.raises(ValueError, match="default_transport"):
        configure(default_transport=bad)


@pytest.mark.parametrize("member", [*ChannelTransport, *Encoding])
def test_enum_members_pickle_round_trip_to_same_member(member: object) -> None:
    assert pickle.loads(pickle.dumps(member)) is member


# -- configured -----------------------------------------------------------------------------


def test_configured_block_sees_overrides_and_exit_restores() -> None:
    configure(tail_log_lines=3)
    with configured(tail_log_lines=5, cleanup_timeout="60s") as merged:
        assert merged["tail_log_lines"] == 5 and merged["cleanup_timeout"] == "1m"
        assert internal.get("tail_log_lines") == 5
        configure(enable_file_capture=True)
    assert get_runtime_config() == {"tail_log_lines": 3}


def test_configured_exception_in_block_still_restores() -> None:
    with pytest.raises(RuntimeError, match="boom"), configured(enable_tls=True):
        raise RuntimeError("boom")
    assert get_runtime_config() == {}
    assert internal.get("enable_tls") is False


def test_configured_nested_blocks_restore_in_order() -> None:
    with configured(tail_log_lines=1):
        with configured(tail_log_lines=2):
            assert internal.get("tail_log_lines") == 2
        assert internal.get("tail_log_lines") == 1
    assert internal.get("tail_log_lines") == 0


def test_configured_no_overrides_yields_current_config() -> None:
    with configured() as merged:
        assert merged["default_transport"] is ChannelTransport.TcpWithLocalhost


# -- copies and snapshots -------------------------------------------------------------------


def test_get_global_config_mutating_result_has_no_effect() -> None:
    merged = get_global_config()
    merged["tail_log_lines"] = 99
    merged.clear()
    assert internal.get("tail_log_lines") == 0
    runtime = get_runtime_config()
    runtime["tail_log_lines"] = 99
    assert get_runtime_config() == {}


def test_clear_runtime_config_restores_lower_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERACTOR_MESH_TAIL_LOG_LINES", "4")
    internal.reload()
    configure(tail_log_lines=9)
    clear_runtime_config()
    assert internal.get("tail_log_lines") == 4
    assert get_runtime_config() == {}


def test_snapshot_pickled_and_applied_replaces_runtime_layer() -> None:
    configure(default_transport="tcp", remote_alloc_allowed_port_range=slice(1, 5))
    shipped = pickle.loads(pickle.dumps(internal.runtime_snapshot()))
    clear_runtime_config()
    configure(enable_tls=True)
    internal.apply_snapshot(shipped)
    assert get_runtime_config() == {
        "default_transport": ChannelTransport.TcpWithHostname,
        "remote_alloc_allowed_port_range": slice(1, 5),
    }


# -- environment layer ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "text", "key", "value"),
    [
        ("HYPERACTOR_DEFAULT_TRANSPORT", "tcp", "default_transport",
         ChannelTransport.TcpWithHostname),
        ("HYPERACTOR_MESH_ENABLE_LOG_FORWARDING", "true", "enable_log_forwarding", True),
        ("HYPERACTOR_CLEANUP_TIMEOUT", "120s", "cleanup_timeout", "2m"),
        ("HYPERACTOR_MESH_ORPHAN_TIMEOUT", "5s", "mesh_orphan_timeout", "5s"),
        ("MONARCH_ENABLE_FILE_CAPTURE", "ON", "enable_file_capture", True),
        ("HYPERACTOR_MESH_SMALL_WRITE_THRESHOLD", "1024", "small_write_threshold", 1024),
        ("HYPERACTOR_CHANNEL_TCP_CONGESTION", "reno", "channel_tcp_congestion", "reno"),
        ("MONARCH_DEFAULT_ENCODING", "multipart", "default_encoding", Encoding.Multipart),
        ("MONARCH_REMOTE_ALLOC_ALLOWED_PORT_RANGE", "26600..26610",
         "remote_alloc_allowed_port_range", slice(26600, 26610)),
        ("MONARCH_REMOTE_ALLOC_ALLOWED_PORT_RANGE", "100:", "remote_alloc_allowed_port_range",
         slice(100, None)),
        ("MONARCH_MESH_ADMIN_ADDR", "", "mesh_admin_addr", ""),
        ("MONARCH_TLS_CA_FILE", "/etc/ca.pem", "tls_ca_file", "/etc/ca.pem"),
    ],
)
def test_env_variable_set_overrides_default(
    monkeypatch: pytest.MonkeyPatch, var: str, text: str, key: str, value: object
) -> None:
    monkeypatch.setenv(var, text)
    internal.reload()
    assert get_global_config()[key] == value
    assert get_runtime_config() == {}


def test_env_names_every_key_has_monarch_form() -> None:
    for key in KEYS.values():
        assert key.env_names[-1] == f"MONARCH_{key.name.upper()}"


def test_env_monarch_form_every_key_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {Kind.ENCODING: "bincode", Kind.SLICE: "1..2", Kind.BOOL: "yes",
             Kind.TRANSPORT: "tcp"}
    settable = {name: key for name, key in KEYS.items() if name not in INERT}
    for key in settable.values():
        raw = _sample_value(key)
        monkeypatch.setenv(f"MONARCH_{key.name.upper()}", texts.get(key.kind, str(raw)))
    internal.reload()
    merged = get_global_config()
    assert merged["tail_log_lines"] == 7 and merged["cleanup_timeout"] == "1m 30s"
    assert all(merged[name] != key.default or key.kind is Kind.BOOL
               for name, key in settable.items())


def test_env_hyperactor_form_wins_over_monarch_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONARCH_CLEANUP_TIMEOUT", "1s")
    monkeypatch.setenv("HYPERACTOR_CLEANUP_TIMEOUT", "2s")
    internal.reload()
    assert internal.get("cleanup_timeout") == "2s"


def test_env_runtime_layer_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERACTOR_CLEANUP_TIMEOUT", "2s")
    internal.reload()
    configure(cleanup_timeout="7s")
    assert internal.get("cleanup_timeout") == "7s"
    assert internal.duration_seconds("cleanup_timeout") == 7.0


@pytest.mark.parametrize(
    ("var", "text"),
    [
        ("HYPERACTOR_CLEANUP_TIMEOUT", "30"),
        ("HYPERACTOR_DEFAULT_TRANSPORT", "carrier-pigeon"),
        ("HYPERACTOR_MESH_TAIL_LOG_LINES", "many"),
        ("MONARCH_ENABLE_TLS", "maybe"),
        ("MONARCH_DEFAULT_ENCODING", "xml"),
        ("MONARCH_REMOTE_ALLOC_ALLOWED_PORT_RANGE", "a..b"),
    ],
)
def test_env_malformed_value_raises_value_error_naming_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, text: str
) -> None:
    monkeypatch.setenv(var, text)
    with pytest.raises(ValueError, match=f"Environment variable {var}="):
        internal.reload()
    assert get_global_config() == _PINNED_DEFAULTS


# -- config file layer ----------------------------------------------------------------------


def _write_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> Path:
    path = tmp_path / "monarch.toml"
    path.write_text(text)
    monkeypatch.setenv("MONARCH_CONFIG_FILE", str(path))
    return path


def test_file_values_override_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _write_config(
        monkeypatch,
        tmp_path,
        'default_transport = "tcp"\ncleanup_timeout = "90s"\ntail_log_lines = 12\n'
        'default_encoding = "Multipart"\nremote_alloc_allowed_port_range = [26600, 26610]\n'
        'channel_tcp_congestion = "reno"\n',
    )
    internal.reload()
    merged = get_global_config()
    assert merged["default_transport"] is ChannelTransport.TcpWithHostname
    assert merged["cleanup_timeout"] == "1m 30s"
    assert merged["tail_log_lines"] == 12
    assert merged["default_encoding"] is Encoding.Multipart
    assert merged["remote_alloc_allowed_port_range"] == slice(26600, 26610)
    assert merged["channel_tcp_congestion"] == "reno"
    assert get_runtime_config() == {}


def test_file_environment_wins_over_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _write_config(monkeypatch, tmp_path, "tail_log_lines = 12\n")
    monkeypatch.setenv("HYPERACTOR_MESH_TAIL_LOG_LINES", "13")
    internal.reload()
    assert internal.get("tail_log_lines") == 13


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cleanup_timout = '1s'\n", "Did you mean 'cleanup_timeout'"),
        ("tail_log_lines = 'x'\n", "'tail_log_lines' expects int"),
        ("cleanup_timeout = '30'\n", "Invalid duration format"),
        ("this is = not toml", "not valid TOML"),
    ],
)
def test_file_bad_content_raises_value_error_naming_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, fragment: str
) -> None:
    path = _write_config(monkeypatch, tmp_path, text)
    with pytest.raises(ValueError, match=fragment) as info:
        internal.reload()
    assert str(path) in str(info.value)


def test_file_missing_raises_value_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MONARCH_CONFIG_FILE", str(tmp_path / "absent.toml"))
    with pytest.raises(ValueError, match="Cannot read the config file"):
        internal.reload()


def test_file_without_tomllib_raises_runtime_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _write_config(monkeypatch, tmp_path, "tail_log_lines = 1\n")
    monkeypatch.setattr(sources, "_import_tomllib", lambda: None)
    with pytest.raises(RuntimeError, match=r"needs Python 3\.11"):
        internal.reload()


# -- pytest helpers -------------------------------------------------------------------------


def _cases(decorated: Any) -> list[dict[str, object]]:
    (mark,) = [mark for mark in decorated.pytestmark if mark.name == "parametrize"]
    return [param.values[0] for param in mark.args[1]]


def test_parametrize_config_sets_cartesian_product() -> None:
    @parametrize_config(tail_log_lines={1, 2}, enable_tls={True, False})
    def body() -> None:
        pass

    cases = _cases(body)
    assert len(cases) == 4
    assert {(c["tail_log_lines"], c["enable_tls"]) for c in cases} == {
        (1, False), (1, True), (2, False), (2, True)
    }


def test_parametrize_config_pointwise_lists_zipped() -> None:
    @parametrize_config_pointwise(tail_log_lines=[1, 2], cleanup_timeout=["1s", "2s"])
    def body() -> None:
        pass

    assert _cases(body) == [
        {"tail_log_lines": 1, "cleanup_timeout": "1s"},
        {"tail_log_lines": 2, "cleanup_timeout": "2s"},
    ]


def test_parametrize_config_pointwise_unequal_lengths_raise_value_error() -> None:
    with pytest.raises(ValueError, match="equal length"):
        parametrize_config_pointwise(tail_log_lines=[1, 2], cleanup_timeout=["1s"])


def test_parametrize_config_invalid_key_or_value_fails_at_decoration() -> None:
    with pytest.raises(ValueError, match="Unknown config key"):
        parametrize_config(no_such_key={1})
    with pytest.raises(TypeError, match="Invalid duration format"):
        parametrize_config(cleanup_timeout={"30"})


def test_parametrize_config_wrapper_applies_then_restores() -> None:
    seen: list[object] = []

    @parametrize_config(tail_log_lines={5})
    def body(extra: int) -> None:
        seen.append((extra, internal.get("tail_log_lines")))

    (case,) = _cases(body)
    hidden = [name for name in inspect.signature(body).parameters if name != "extra"]
    body(3, **{hidden[0]: case})
    assert seen == [(3, 5)]
    assert get_runtime_config() == {}


@parametrize_config(tail_log_lines={1, 2}, default_transport={"tcp", ChannelTransport.Unix})
def test_parametrize_config_collected_test_runs_under_its_case() -> None:
    assert internal.get("tail_log_lines") in (1, 2)
    assert internal.get("default_transport") in (ChannelTransport.TcpWithHostname,
                                                 ChannelTransport.Unix)


@parametrize_config(enable_tls={True})
@parametrize_config_pointwise(tail_log_lines=[3], cleanup_timeout=["4s"])
async def test_parametrize_config_stacked_async_test_sees_both(tmp_path: Path) -> None:
    assert await asyncio.to_thread(tmp_path.exists)
    assert internal.get("enable_tls") is True
    assert internal.get("tail_log_lines") == 3
    assert internal.get("cleanup_timeout") == "4s"


# -- concurrency ----------------------------------------------------------------------------


def test_threads_concurrent_writes_readers_never_see_torn_update() -> None:
    """Writers set two keys together; readers must always see them equal (atomic publish)."""
    rounds = 200
    start = threading.Barrier(4)
    errors: list[Exception] = []
    configure(tail_log_lines=-1, small_write_threshold=-1)

    def writer(offset: int) -> None:
        start.wait()
        for i in range(rounds):
            value = offset + i
            configure(tail_log_lines=value, small_write_threshold=value)

    def reader() -> None:
        start.wait()
        for _ in range(rounds):
            merged = get_global_config()
            if merged["tail_log_lines"] != merged["small_write_threshold"]:
                raise AssertionError(f"Torn read: {merged['tail_log_lines']}.")
            internal.get("tail_log_lines")

    def guarded(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 (re-reported by the main thread's assert)
            errors.append(exc)

    threads = [
        threading.Thread(target=guarded, args=(writer, 0)),
        threading.Thread(target=guarded, args=(writer, 10_000)),
        threading.Thread(target=guarded, args=(reader,)),
        threading.Thread(target=guarded, args=(reader,)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    final = get_global_config()
    assert final["tail_log_lines"] == final["small_write_threshold"]
    assert final["tail_log_lines"] in (rounds - 1, 10_000 + rounds - 1)


# -- keys with no meaning here are kept and read back, and say that they change nothing ------


def _inert_sample(key: ConfigKey) -> object:
    """A value of the right kind that differs from the default of inert key `key`."""
    if key.name == "rdma_peer_device_affinity":
        return "match_name"
    match key.kind:
        case Kind.DURATION:
            return "1m 30s"
        case Kind.INT:
            return 1 if key.default is None else key.default + 1  # type: ignore[operator]
        case Kind.BOOL:
            return not key.default
        case Kind.FLOAT:
            return 0.5
        case Kind.ENCODING:
            return Encoding.Json
        case _:
            return "tcp://10.0.0.1:26600"


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Encoding):
        return value.name.lower()
    return str(value)


@pytest.mark.parametrize("name", sorted(INERT))
def test_inert_key_other_value_reads_back_and_warns_once_saying_why(name: str) -> None:
    key = KEYS[name]
    value = _inert_sample(key)
    registry.WARNED.clear()
    with pytest.warns(InertConfigWarning) as caught:
        configure(**{name: value})
    assert get_global_config()[name] == value
    assert get_runtime_config() == {name: value}
    [warning] = caught.list
    assert f"Config key {name!r} is set to {value!r}, which changes nothing" in str(
        warning.message)
    assert warning.filename == __file__  # points at the line that set it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        configure(**{name: value})  # the same value again: no second warning
        with configured(**{name: key.default}) as merged:  # the default: none either
            assert merged[name] == key.default
    assert get_global_config()[name] == value


@pytest.mark.parametrize("name", sorted(INERT))
def test_inert_key_from_environment_reads_back(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    key = KEYS[name]
    var = key.env_names[0]
    value = _inert_sample(key)
    monkeypatch.setenv(var, _env_text(value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertConfigWarning)  # warned once per process
        internal.reload()
    assert get_global_config()[name] == value


def test_inert_key_in_config_file_reads_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _write_config(monkeypatch, tmp_path, "message_ttl_default = 3\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertConfigWarning)
        internal.reload()
    assert get_global_config()["message_ttl_default"] == 3


def test_inert_keys_listed_with_their_defaults() -> None:
    merged = get_global_config()
    assert {name: merged[name] for name in INERT} == {name: KEYS[name].default for name in INERT}


def test_transport_member_that_cannot_work_here_is_kept_and_refused_at_use() -> None:
    from monarch._src.config import check_usable

    with configured(default_transport=ChannelTransport.MetaTlsWithHostname) as merged:
        assert merged["default_transport"] is ChannelTransport.MetaTlsWithHostname
        with pytest.raises(ValueError, match="not available in this implementation.*Use 'tls'"):
            check_usable(merged["default_transport"])
    check_usable(ChannelTransport.Unix)


@pytest.mark.parametrize(
    "value",
    ["metatls", "metatls-hostname", "local", "inproc", "MetaTLS",
     ChannelTransport.MetaTlsWithIpV6, ChannelTransport.MetaTlsWithHostname,
     ChannelTransport.Local],
)
def test_transport_that_cannot_work_here_is_refused_with_alternatives(value: object) -> None:
    with pytest.raises(ValueError, match="not available in this implementation") as info:
        internal.parse_transport(value)  # type: ignore[arg-type]
    assert "Use 'tls'" in str(info.value) and "'unix'" in str(info.value)
    if isinstance(value, str):  # the words are refused by the key too; members are kept
        with pytest.raises(ValueError, match="default_transport"):
            configure(default_transport=value)
    from monarch.actor import enable_transport

    with pytest.raises(ValueError, match="not available in this implementation"):
        enable_transport(value)  # type: ignore[arg-type]
    assert get_runtime_config() == {}


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("rdma_ibverbs_target", "gpu:0", "Name the device instead, as 'nic:<name>'"),
        ("rdma_ibverbs_target", "cpu:1", "not chosen by NUMA node or GPU"),
        ("rdma_peer_device_affinity", "groups:", "expects '', 'any', 'match_name'"),
        ("rdma_peer_device_affinity", "nearest", "'groups:<dev>,<dev>|<dev>,...'"),
        ("channel_tcp_congestion", "cubic; reboot", "name of a TCP congestion control"),
        ("mesh_admin_addr", "no-port", "expects 'host:port'"),
        ("remote_alloc_allowed_port_range", slice(26610, 26600), "0 < start < stop"),
        ("remote_alloc_allowed_port_range", slice(None, 10), "0 < start < stop"),
        ("rdma_tcp_fallback_parallelism", 0, "from 1 to 64"),
        ("rdma_tcp_fallback_parallelism", 65, "from 1 to 64"),
    ],
)
def test_key_value_without_meaning_here_raises_saying_what_works(
    name: str, value: object, fragment: str
) -> None:
    with pytest.raises(ValueError, match=repr(name)) as info:
        configure(**{name: value})
    assert fragment in str(info.value)


def test_rdma_ibverbs_target_names_the_device() -> None:
    from monarch._src.rdma.errors import RdmaInitError
    from monarch._src.rdma.ibverbs import device_target

    assert device_target("nic:mlx5_1") == "mlx5_1"
    with pytest.raises(RdmaInitError, match="RDMA_IBVERBS_TARGET"):
        device_target("mlx5_2")  # Monarch's rule: the target names its kind
    assert device_target("") is None
    configure(rdma_ibverbs_target="nic:mlx5_3", rdma_peer_device_affinity="any")
    assert internal.get("rdma_ibverbs_target") == "nic:mlx5_3"


def test_mesh_admin_addr_is_the_control_server_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from monarch._src.admin.server import server_address_from_env

    monkeypatch.setenv("MONARCH_DEBUG_SERVER_PORT", "27999")
    assert server_address_from_env() == ("localhost", 27999)
    configure(mesh_admin_addr="[::]:1729")
    assert server_address_from_env() == ("::", 1729)
    configure(mesh_admin_addr="127.0.0.1:28001")
    assert server_address_from_env() == ("127.0.0.1", 28001)
