"""SQL telemetry of a real job: `ProcessJob(...).enable_telemetry(...)`, then SQL through
`state.query_engine_client` over what the client and the job's procs recorded.

One job serves the module (procs are expensive on CI): a workload runs once and each test
asks the tables one question about it. Rows reach the collector within `record.FLUSH_S`, so
the tests poll the query until the expected rows are there (bounded by a deadline).
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from monarch._src.job.telemetry_store import TelemetryStore, arrow_schema, start_socket_ingest
from monarch._src.telemetry import record
from monarch.actor import Actor, endpoint, span
from monarch.job import ProcessJob, TelemetryConfig
from tests.prometheus_server import poll, prometheus_scraping

pytestmark = pytest.mark.timeout(180)

CALLS = 20


class Pinger(Actor):
    @endpoint
    def ping(self, x: int) -> int:
        return x + 1

    @endpoint
    def fail(self) -> None:
        raise RuntimeError("telemetry test failure")

    @endpoint
    def traced_work(self, name: str) -> None:
        with span(name):
            with span(f"{name}.inner"):
                pass


class Relay(Actor):
    @endpoint
    def relay(self, target: Any) -> int:
        return sum(target.ping.call(1).get().values())


def _rows(state: Any, sql: str, ready: Callable[[list[dict[str, Any]]], bool] = bool,
          timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows: list[dict[str, Any]] = state.query_engine_client.query(sql)["rows"]
        if ready(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


@pytest.fixture(scope="module")
def job() -> Iterator[tuple[Any, dict[str, Any]]]:
    import monarch.actor

    job = ProcessJob({"hosts": 1}).enable_telemetry(
        TelemetryConfig(dashboard_port=0, snapshot_interval_secs=0))
    state = job.state(cached_path=None)
    previous_hook = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = lambda failure: None
    try:
        procs = state.hosts.spawn_procs(per_host={"workers": 2}, name="tm_procs")
        pingers = procs.spawn("tm_pinger", Pinger)
        for i in range(CALLS):
            pingers.ping.call(i).get()
        pingers.slice(workers=1).traced_work.call_one("tm_span").get()
        relay = procs.slice(workers=0).spawn("tm_relay", Relay)
        relay.relay.call_one(pingers).get()
        doomed = procs.spawn("tm_doomed", Pinger)
        doomed.initialized.get()
        doomed.fail.broadcast()
        stopped = procs.spawn("tm_stopped", Pinger)
        stopped.initialized.get()
        stopped.stop("test stops it").get()
        yield state, {"procs": procs}
    finally:
        monarch.actor.unhandled_fault_hook = previous_hook
        job.kill()


def test_telemetry_brings_the_admin_api_along(job: Any) -> None:
    state, _ = job
    assert state.admin_url and state.query_engine is None and state.dashboard_url is None


def _mesh_id(state: Any, name: str) -> int:
    rows = _rows(state, f"SELECT id FROM meshes WHERE given_name = '{name}'")
    assert len(rows) == 1, rows
    return int(rows[0]["id"])


def test_every_table_is_in_the_catalog_with_torchmonarchs_columns(job: Any) -> None:
    state, _ = job
    rows = _rows(state, "SELECT table_name, column_name, data_type, is_nullable "
                        "FROM information_schema.columns WHERE table_schema = 'public' "
                        "ORDER BY table_name, ordinal_position")
    got: dict[str, list[tuple[str, str, bool]]] = {}
    for row in rows:
        got.setdefault(row["table_name"], []).append(
            (row["column_name"], row["data_type"], row["is_nullable"] == "YES"))
    for table in record.SCHEMAS:
        schema = arrow_schema(table)
        assert [c for c, _, _ in got[table]] == schema.names, table
        assert [n for _, _, n in got[table]] == [f.nullable for f in schema], table
    assert set(got) == set(record.SCHEMAS)


def test_each_call_is_a_sent_message_and_each_receipt_a_message_with_three_events(job: Any) -> None:
    state, _ = job
    mesh = _mesh_id(state, "tm_pinger")
    sent = _rows(state, f"SELECT sender_actor_id, view_json FROM sent_messages "
                        f"WHERE actor_mesh_id = {mesh}", lambda r: len(r) >= CALLS + 1)
    root = _rows(state, "SELECT id FROM actors WHERE display_name = '<root>'")[0]["id"]
    views = Counter(r["view_json"] for r in sent if r["sender_actor_id"] == root)
    whole = '{"labels":["hosts","workers"],"slice":{"offset":0,"sizes":[1,2],"strides":[2,1]}}'
    one = '{"labels":["hosts"],"slice":{"offset":1,"sizes":[1],"strides":[2]}}'
    assert views == {whole: CALLS, one: 1}  # the casts to all, the call_one to rank 1
    received = _rows(state, "SELECT msg.id, msg.from_actor_id, msg.timestamp_us FROM messages "
                            "msg JOIN actors a ON msg.to_actor_id = a.id "
                            f"WHERE a.mesh_id = {mesh} AND msg.endpoint = 'ping'",
                     lambda r: len(r) >= 2 * CALLS + 2)
    assert len(received) == 2 * CALLS + 2  # 20 casts to 2 actors, and the relay's one cast
    assert Counter(r["from_actor_id"] for r in received)[root] == 2 * CALLS
    ids = ", ".join(str(r["id"]) for r in received)
    events = _rows(state, f"SELECT message_id, status, timestamp_us FROM message_status_events "
                          f"WHERE message_id IN ({ids})", lambda r: len(r) >= 3 * len(received))
    assert Counter(e["status"] for e in events) == {"queued": len(received),
                                                    "active": len(received),
                                                    "complete": len(received)}
    active = {e["message_id"]: e["timestamp_us"] for e in events if e["status"] == "active"}
    assert all(active[r["id"]] == r["timestamp_us"] for r in received)


def test_an_actor_calling_another_is_the_sender_of_its_messages(job: Any) -> None:
    state, _ = job
    relay_actor = _rows(state, "SELECT a.id FROM actors a JOIN meshes m ON a.mesh_id = m.id "
                               "WHERE m.given_name = 'tm_relay'")[0]["id"]
    rows = _rows(state, "SELECT COUNT(*) AS n FROM messages WHERE from_actor_id = "
                        f"{relay_actor} AND endpoint = 'ping'", lambda r: r[0]["n"] == 2)
    assert rows[0]["n"] == 2
    sent = _rows(state, f"SELECT COUNT(*) AS n FROM sent_messages WHERE sender_actor_id = "
                        f"{relay_actor}")
    assert sent[0]["n"] == 1


def test_meshes_form_the_tree_host_proc_actor(job: Any) -> None:
    state, _ = job
    rows = _rows(state, "SELECT a.class AS actor_class, p.class AS proc_class, "
                        "h.class AS host_class, h.given_name AS host, a.shape_json "
                        "FROM meshes a JOIN meshes p ON a.parent_mesh_id = p.id "
                        "JOIN meshes h ON p.parent_mesh_id = h.id "
                        "WHERE a.given_name = 'tm_pinger'")
    assert rows and rows[0]["actor_class"] == "Python<Pinger>"
    assert (rows[0]["proc_class"], rows[0]["host_class"], rows[0]["host"]) == ("Proc", "Host",
                                                                               "hosts")
    assert json.loads(rows[0]["shape_json"]) == {"inner": {"labels": ["hosts", "workers"],
                                                           "sizes": [1, 2]}}
    agents = _rows(state, "SELECT a.full_name FROM actors a JOIN meshes m ON a.mesh_id = m.id "
                          "WHERE m.given_name = 'tm_procs'", lambda r: len(r) == 2)
    assert len(agents) == 2 and all(r["full_name"].startswith("proc_agent.") for r in agents)


def test_actor_lifecycles_ready_failed_and_stopped(job: Any) -> None:
    state, _ = job

    def statuses(mesh: str, expect: int) -> dict[int, list[tuple[str, Any]]]:
        rows = _rows(state, "SELECT e.actor_id, e.new_status, e.reason FROM "
                            "actor_status_events e JOIN actors a ON e.actor_id = a.id JOIN "
                            f"meshes m ON a.mesh_id = m.id WHERE m.given_name = '{mesh}' "
                            "ORDER BY e.timestamp_us", lambda r: len(r) >= expect)
        out: dict[int, list[tuple[str, Any]]] = {}
        for r in rows:
            out.setdefault(r["actor_id"], []).append((r["new_status"], r["reason"]))
        return out

    ok = statuses("tm_pinger", 6)
    assert len(ok) == 2
    assert all([s for s, _ in v] == ["Created", "Initializing", "Idle"] for v in ok.values())
    failed = statuses("tm_doomed", 10)
    assert all({s for s, _ in v} == {"Created", "Initializing", "Idle", "Stopping", "Failed"}
               for v in failed.values()), failed
    reasons = [r for v in failed.values() for s, r in v if s == "Failed"]
    assert reasons and all("telemetry test failure" in r for r in reasons)
    stopped = statuses("tm_stopped", 10)
    assert all([s for s, _ in v][-2:] == ["Stopping", "Stopped"] for v in stopped.values())
    assert all(r == "test stops it" for v in stopped.values() for s, r in v if s == "Stopped")
    root = _rows(state, "SELECT e.new_status FROM actor_status_events e JOIN actors a ON "
                        "e.actor_id = a.id WHERE a.display_name = '<root>'")
    assert {"Created", "Client"} <= {r["new_status"] for r in root}


def test_the_handler_that_failed_its_actor_is_a_failed_message(job: Any) -> None:
    state, _ = job
    rows = _rows(state, "SELECT e.status FROM message_status_events e JOIN messages msg ON "
                        "e.message_id = msg.id WHERE msg.endpoint = 'fail'",
                 lambda r: len(r) >= 6)
    assert Counter(r["status"] for r in rows) == {"queued": 2, "active": 2, "failed": 2}


def test_pyspy_dumps_are_stored_and_queried(job: Any) -> None:
    state, _ = job
    dump = {"Ok": {"pid": 7, "binary": "python", "stack_traces": [{
        "pid": 7, "thread_id": 3, "thread_name": "MainThread", "os_thread_id": 9,
        "active": True, "owns_gil": True, "frames": [
            {"name": "inner", "filename": "a.py", "line": 4, "is_entry": False,
             "locals": [{"name": "x", "addr": 1, "arg": True, "repr": "1"}]},
            {"name": "main", "filename": "a.py", "line": 9, "is_entry": True}]}],
        "warnings": []}}
    assert state.query_engine_client.store_pyspy_dump("d1", "p[0]", json.dumps(dump)) == {
        "status": "ok"}
    frames = _rows(state, "SELECT name, line FROM pyspy_frames WHERE dump_id = 'd1' "
                          "ORDER BY frame_depth")
    assert frames == [{"name": "inner", "line": 4}, {"name": "main", "line": 9}]
    local = _rows(state, "SELECT name, repr FROM pyspy_local_variables WHERE dump_id = 'd1'")
    assert local == [{"name": "x", "repr": "1"}]
    with pytest.raises(urllib.error.HTTPError, match="py-spy's result object"):
        state.query_engine_client.store_pyspy_dump("d2", "p[0]", json.dumps({"Err": "x"}))


def test_a_bad_query_is_a_400_naming_what_is_wrong(job: Any) -> None:
    state, _ = job
    with pytest.raises(urllib.error.HTTPError) as info:
        state.query_engine_client.query("SELECT nope FROM actors")
    assert info.value.code == 400 and "nope" in str(info.value.reason)


def test_config_fields_are_checked() -> None:
    with pytest.raises(ValueError, match="retention_secs"):
        TelemetryConfig(retention_secs=-1)
    with pytest.raises(ValueError, match="dashboard_port"):
        TelemetryConfig(dashboard_port=70000)
    with pytest.raises(TypeError, match="include_dashboard"):
        TelemetryConfig(include_dashboard="yes")  # type: ignore[arg-type]
    assert TelemetryConfig(include_dashboard=True).include_dashboard  # served: tests/dashboard
    with pytest.raises(TypeError, match="not both"):
        ProcessJob({"hosts": 1}).enable_telemetry(TelemetryConfig(), retention_secs=1)
    with pytest.raises(TypeError, match="expected a TelemetryConfig"):
        ProcessJob({"hosts": 1}).enable_telemetry({"retention_secs": 1})  # type: ignore[arg-type]
    job = ProcessJob({"hosts": 1}).enable_telemetry(retention_secs=5)
    assert job._telemetry_config == TelemetryConfig(retention_secs=5)


def test_retention_trims_history_but_keeps_entities() -> None:
    store = TelemetryStore(retention_secs=60)
    old = record.now_us() - 120 * 1_000_000
    store.append([["messages", {"id": 1, "timestamp_us": old, "from_actor_id": 1,
                                "to_actor_id": 2, "endpoint": "e", "port_index": None}],
                  ["messages", {"id": 2, "timestamp_us": record.now_us(), "from_actor_id": 1,
                                "to_actor_id": 2, "endpoint": "e", "port_index": None}],
                  ["actors", {"id": 3, "timestamp_us": old, "mesh_id": 1, "rank": 0,
                              "full_name": "a.p@tcp://h:1", "display_name": None}]])
    assert store.scan("messages").column("id").to_pylist() == [2]
    assert store.scan("actors").num_rows == 1
    assert store.scan("messages", filter_expr="id = 2", projection=[0]).num_columns == 1
    with pytest.raises(ValueError, match="No telemetry table"):
        store.scan("nope")


def test_a_sink_holds_rows_until_its_collector_listens_and_one_collector_owns_a_socket(
        tmp_path: Any) -> None:
    path = str(tmp_path / "t.sock")
    sink = record.Sink(path)
    try:
        sink.put("events", {"name": "e", "target": "t", "level": "INFO", "fields_json": "{}",
                            "timestamp_us": 1, "parent_span": None, "thread_id": "1",
                            "thread_name": "main", "module_path": None, "file": None,
                            "line": None})
        sink.flush()  # no collector yet: the row is kept
        store = TelemetryStore()
        server = start_socket_ingest(store, path)
        try:
            assert os.stat(path).st_mode & 0o777 == 0o600
            with pytest.raises(RuntimeError, match="live collector"):
                start_socket_ingest(TelemetryStore(), path)
            deadline = time.monotonic() + 10
            while store.scan("events").num_rows == 0 and time.monotonic() < deadline:
                sink.flush()
                time.sleep(0.05)
            assert store.scan("events").column("name").to_pylist() == ["e"]
        finally:
            server.shutdown()
            server.server_close()
        # The collector is gone but its socket file stays: a new one replaces it.
        assert os.path.exists(path)
        probe = socket.socket(socket.AF_UNIX)
        with pytest.raises(OSError):
            probe.connect(path)
        probe.close()
        server = start_socket_ingest(TelemetryStore(), path)
        server.shutdown()
        server.server_close()
    finally:
        sink.close()


def test_runtime_and_user_metrics_are_rows_of_metric_sums(job: Any) -> None:
    import monarch.actor

    state, _ = job
    monarch.actor.get_meter().create_counter("tm.requests").add(3, {"route": "a"})
    posts = _rows(state, "SELECT attributes_json, sum_u64, temporality FROM metric_sums "
                         "WHERE name = 'mailbox.posts' AND sum_u64 > 0")
    assert posts and all(r["temporality"] == "delta" for r in posts)
    assert all({"actor_id", "dest_actor_id"} <= set(json.loads(r["attributes_json"]))
               for r in posts)
    handled = _rows(state, "SELECT SUM(count) AS n FROM metric_histograms "
                           "WHERE name = 'actor.message_handler_duration.ns'",
                    lambda r: (r[0]["n"] or 0) >= 2 * CALLS)
    assert handled[0]["n"] >= 2 * CALLS
    mine = _rows(state, "SELECT scope_name, attributes_json, sum_u64 FROM metric_sums "
                        "WHERE name = 'tm.requests'")
    assert mine == [{"scope_name": "monarch", "attributes_json": '{"route":"a"}', "sum_u64": 3}]


def test_user_spans_are_rows_of_spans_with_enter_and_exit(job: Any) -> None:
    state, _ = job
    rows = _rows(state, "SELECT id, parent_id, fields_json FROM spans WHERE name = "
                        "'python_user_span' AND fields_json LIKE '%tm_span%' "
                        "ORDER BY timestamp_us", lambda r: len(r) == 2)
    outer, inner = rows
    assert json.loads(outer["fields_json"])["name"] == "tm_span"
    assert "tm_pinger" in json.loads(outer["fields_json"])["monarch.actor"]
    assert inner["parent_id"] == outer["id"] and outer["parent_id"] is None
    events = _rows(state, f"SELECT event_type FROM span_events WHERE id = {outer['id']} "
                          "ORDER BY timestamp_us", lambda r: len(r) == 2)
    assert [e["event_type"] for e in events] == ["enter", "exit"]


def test_snapshots_record_the_mesh_tree() -> None:
    job = ProcessJob({"hosts": 1}).enable_telemetry(
        TelemetryConfig(dashboard_port=0, snapshot_interval_secs=0.5))
    state = job.state(cached_path=None)
    try:
        procs = state.hosts.spawn_procs(per_host={"workers": 2}, name="snap_procs")
        procs.spawn("snap_worker", Pinger).initialized.get()
        sql = ("SELECT a.snapshot_id, a.node_id, pn.proc_name, h.node_id AS host "
               "FROM actor_nodes a "
               "JOIN children c ON c.snapshot_id = a.snapshot_id AND c.child_id = a.node_id "
               "JOIN proc_nodes pn ON pn.snapshot_id = c.snapshot_id AND pn.node_id = c.parent_id "
               "JOIN children hc ON hc.snapshot_id = pn.snapshot_id AND hc.child_id = pn.node_id "
               "JOIN host_nodes h ON h.snapshot_id = hc.snapshot_id AND h.node_id = hc.parent_id "
               "WHERE pn.proc_name LIKE 'snap_procs%'")
        rows = _rows(state, sql, lambda r: len({x["snapshot_id"] for x in r}) >= 1 and len(
            [x for x in r if x["snapshot_id"] == r[0]["snapshot_id"]]) == 2)
        first = [r for r in rows if r["snapshot_id"] == rows[0]["snapshot_id"]]
        assert len(first) == 2 and all(r["host"].startswith("host:") for r in first)
        kinds = _rows(state, "SELECT node_kind, COUNT(*) AS n FROM nodes WHERE snapshot_id = "
                             f"'{rows[0]['snapshot_id']}' GROUP BY node_kind")
        assert {r["node_kind"] for r in kinds} == {"root", "host", "proc", "actor"}
    finally:
        job.kill()


def test_a_real_prometheus_scrapes_the_jobs_metrics(job: Any) -> None:
    state, _ = job
    url = f"{state.telemetry_url}/metrics"
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    assert "# TYPE mailbox_posts_total counter" in text
    assert 'service_name="monarch-proc-' in text and 'service_name="monarch-client"' in text
    with prometheus_scraping(url) as query:
        deadline = time.monotonic() + 60
        handled = poll(query, 'sum(actor_messages_received_total{endpoint="ping"})', deadline)
        assert handled and float(handled[0]["value"][1]) >= 2 * CALLS


def test_the_api_refuses_other_hosts_and_cross_site_posts(job: Any) -> None:
    state, _ = job
    url = f"{state.telemetry_url}/api/query"
    body = json.dumps({"sql": "SELECT 1 AS one"}).encode()
    forged = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(forged, timeout=10)
    info.value.close()
    assert info.value.code == 421
    form = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "text/plain"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(form, timeout=10)
    info.value.close()
    assert info.value.code == 415
    assert state.query_engine_client.query("SELECT 1 AS one")["rows"] == [{"one": 1}]


def test_the_admin_api_names_the_telemetry_and_answers_its_sql(job: Any) -> None:
    state, _ = job
    with urllib.request.urlopen(f"{state.admin_url}/v1/admin", timeout=30) as resp:
        assert json.load(resp)["telemetry_url"] == state.telemetry_url
    request = urllib.request.Request(
        f"{state.admin_url}/v1/query", data=json.dumps({"sql": "SELECT 2 AS two"}).encode(),
        method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert json.load(resp) == {"rows": [{"two": 2}]}


def test_without_the_dashboard_the_api_takes_any_free_port() -> None:
    # As on torchmonarch, only the dashboard opens `dashboard_port` (8265 by default): jobs with
    # telemetry alone, on one machine, do not contend for it.
    from urllib.parse import urlparse

    blocker = socket.socket()
    try:
        blocker.bind(("127.0.0.1", TelemetryConfig().dashboard_port))
        blocker.listen()
    except OSError:
        pass  # held by something else already: the job must not need it either way
    job = ProcessJob({"hosts": 1}).enable_telemetry(TelemetryConfig(snapshot_interval_secs=0))
    try:
        state = job.state(cached_path=None)
        assert urlparse(state.telemetry_url).port not in (None, TelemetryConfig().dashboard_port)
        assert state.query_engine_client.query("SELECT 1 AS one")["rows"] == [{"one": 1}]
    finally:
        job.kill()
        blocker.close()
