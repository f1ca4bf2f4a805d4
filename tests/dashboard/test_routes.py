"""The dashboard's routes over real HTTP, on a real job (`workload.py`): the page and its
modules, each view's JSON, the entity routes' id checks, and the admin API proxied without its
token reaching the page.
"""

from __future__ import annotations

import contextlib
import io
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.dashboard import admin as dashboard_admin
from monarch._src.dashboard.data import parse_id
from tests.dashboard.workload import (
    CALLS,
    FAILURE,
    dashboard_job,
    get,
    get_json,
    overview_ready,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def started() -> Iterator[tuple[Any, Any, str]]:
    """(job, state, what starting it printed on stdout)."""
    printed = io.StringIO()
    with contextlib.ExitStack() as stack:
        with contextlib.redirect_stdout(printed):
            job, state = stack.enter_context(dashboard_job())
        yield job, state, printed.getvalue()


@pytest.fixture(scope="module")
def state(started: tuple[Any, Any, str]) -> Any:
    return started[1]


@pytest.fixture(scope="module")
def overview(state: Any) -> dict[str, Any]:
    value: dict[str, Any] = wait_for(f"{state.dashboard_url}/api/dashboard/overview",
                                     overview_ready)
    assert overview_ready(value), value
    return value


@pytest.fixture(scope="module")
def topology(state: Any, overview: dict[str, Any]) -> dict[str, Any]:
    status, value = get_json(f"{state.dashboard_url}/api/dashboard/topology")
    assert status == 200
    return value  # type: ignore[no-any-return]


def _actors(topology: dict[str, Any], mesh: str) -> list[dict[str, Any]]:
    return sorted((a for a in topology["actors"] if a["mesh_name"] == mesh),
                  key=lambda a: a["rank"])


def test_dashboard_url_serves_the_page_on_the_telemetry_server(state: Any) -> None:
    assert state.dashboard_url == state.telemetry_url
    status, ctype, body = get(state.dashboard_url)
    assert status == 200 and ctype.startswith("text/html")
    page = body.decode()
    assert "<title>Monarch Dashboard</title>" in page and 'src="static/app.js"' in page
    # Every module the page imports, transitively, is served as JavaScript.
    pending, seen = ["app.js"], set()
    while pending:
        name = pending.pop()
        seen.add(name)
        status, ctype, body = get(f"{state.dashboard_url}/static/{name}")
        assert status == 200 and ctype.startswith("text/javascript"), name
        pending += [m for m in re.findall(r'from "\./([\w.]+)"', body.decode()) if m not in seen]
    assert {"app.js", "api.js", "draw.js", "overview.js", "topology.js", "explorer.js"} <= seen
    status, ctype, _ = get(f"{state.dashboard_url}/static/style.css")
    assert status == 200 and ctype.startswith("text/css")


def test_the_url_is_announced_once_and_a_second_state_reuses_the_server(
        started: tuple[Any, Any, str]) -> None:
    job, state, printed = started
    assert printed.count(f"Monarch Dashboard: {state.dashboard_url}\n") == 1
    again = io.StringIO()
    with contextlib.redirect_stdout(again):
        second = job.state(cached_path=None)
    assert second.dashboard_url == state.dashboard_url and "Monarch Dashboard" not in \
        again.getvalue()


@pytest.mark.parametrize("path", ["/static/../telemetry_config.py", "/static/%2e%2e/x.py",
                                  "/static/.hidden", "/static/", "/static/nope.js",
                                  "/elsewhere"])
def test_static_files_outside_the_folder_are_404(state: Any, path: str) -> None:
    status, ctype, _ = get(state.dashboard_url + path)
    assert status == 404 and ctype == "application/json"


def test_overview_counts_the_workload_and_lists_the_failed_actors(
        overview: dict[str, Any]) -> None:
    counts = overview["counts"]
    assert counts["workload_actors"] == 6 and counts["failed_actors"] == 2
    assert counts["system_actors"] == counts["actors"] - 6
    assert overview["status"] == {"Idle": 2, "Failed": 2, "Stopped": 2}
    assert 0 < overview["health"] < 100
    errors = overview["errors"]
    assert sorted((e["mesh"], e["rank"]) for e in errors) == [("doomed", 0), ("doomed", 1)]
    assert all(FAILURE in e["reason"] and isinstance(e["actor_id"], str) for e in errors)
    endpoints = {e["endpoint"]: e for e in overview["endpoints"]}
    assert endpoints["ping"]["n"] >= 2 * CALLS and endpoints["ping"]["failed"] == 0
    assert endpoints["fail"] == {"endpoint": "fail", "n": 2, "failed": 2}
    lifecycle = overview["lifecycle"]
    assert lifecycle["failed"] == 2 and lifecycle["complete"] >= 2 * CALLS
    assert overview["success_pct"] == round(100 * lifecycle["complete"] /
                                            (lifecycle["complete"] + 2), 1)
    assert sorted((s["mesh"], s["rank"], s["reason"]) for s in overview["stopped"]) == [
        ("retired", 0, "the test retires it"), ("retired", 1, "the test retires it")]
    series = overview["activity"]["series"]
    assert sum(p["n"] for p in series) >= 2 * CALLS  # the workload ran within the window
    assert series == sorted(series, key=lambda p: p["t_us"])


def test_topology_has_the_mesh_tree_and_every_actors_status(topology: dict[str, Any]) -> None:
    meshes = {m["given_name"]: m for m in topology["meshes"]}
    assert meshes["trainers"]["class"] == "Proc"
    assert meshes["trainers"]["parent_mesh_id"] == meshes["hosts"]["id"]
    assert meshes["pinger"]["parent_mesh_id"] == meshes["trainers"]["id"]
    assert meshes["pinger"]["shape"] == {"hosts": 1, "workers": 2}
    assert meshes["telemetry"]["system"] and not meshes["pinger"]["system"]
    assert [a["status"] for a in _actors(topology, "pinger")] == ["Idle", "Idle"]
    assert [a["status"] for a in _actors(topology, "doomed")] == ["Failed", "Failed"]
    assert [a["reason"] for a in _actors(topology, "retired")] == ["the test retires it"] * 2
    assert "flows" not in topology  # only asked for with ?flows=1
    # 64-bit ids travel as decimal strings (JavaScript's numbers would round them).
    assert all(isinstance(a["id"], str) and a["id"].isdigit() for a in topology["actors"])
    assert all(isinstance(m["id"], str) for m in topology["meshes"])


def test_topology_flows_count_the_messages_between_actors(state: Any,
                                                         topology: dict[str, Any]) -> None:
    status, value = get_json(f"{state.dashboard_url}/api/dashboard/topology?flows=1")
    assert status == 200
    client = next(a["id"] for a in value["actors"] if a["display_name"] == "<root>")
    pingers = {a["id"] for a in _actors(topology, "pinger")}
    to_pingers = [f for f in value["flows"] if f["to_actor_id"] in pingers]
    assert {f["from_actor_id"] for f in to_pingers} == {client}
    assert sorted(f["n"] for f in to_pingers) == [CALLS, CALLS]


def test_actor_detail_has_its_history_and_messages(state: Any,
                                                   topology: dict[str, Any]) -> None:
    doomed = _actors(topology, "doomed")[0]
    status, detail = get_json(f"{state.dashboard_url}/api/dashboard/actor?id={doomed['id']}")
    assert status == 200 and detail["actor"]["status"] == "Failed"
    history = detail["history"]
    assert [h["status"] for h in history][-2:] == ["Stopping", "Failed"]
    assert FAILURE in history[-1]["reason"]
    assert [(m["endpoint"], m["status"]) for m in detail["received"]] == [("fail", "failed")]
    assert detail["received"][0]["peer"].startswith("client.")  # the client cast it
    pinger = _actors(topology, "pinger")[1]
    status, detail = get_json(f"{state.dashboard_url}/api/dashboard/actor?id={pinger['id']}")
    assert status == 200 and detail["counts"] == {"received": CALLS, "sent": 0}
    assert {(m["endpoint"], m["status"]) for m in detail["received"]} == {("ping", "complete")}


def test_mesh_detail_has_its_parents_children_and_actors(state: Any,
                                                        topology: dict[str, Any]) -> None:
    meshes = {m["given_name"]: m for m in topology["meshes"]}
    status, detail = get_json(f"{state.dashboard_url}/api/dashboard/mesh?id="
                              f"{meshes['pinger']['id']}")
    assert status == 200
    assert [p["given_name"] for p in detail["parents"]] == ["trainers", "hosts"]
    assert [a["rank"] for a in detail["actors"]] == [0, 1] and detail["casts"] == CALLS
    status, detail = get_json(f"{state.dashboard_url}/api/dashboard/mesh?id="
                              f"{meshes['trainers']['id']}")
    assert {"pinger", "doomed", "retired"} <= {c["given_name"] for c in detail["children"]}


@pytest.mark.parametrize("query,code", [
    ("", 400), ("id=abc", 400), ("id=1%20OR%201%3D1", 400), ("id=-1", 400),
    (f"id={2**64}", 400), ("id=12345", 404),
])
def test_entity_ids_are_parsed_before_they_reach_sql(state: Any, query: str, code: int) -> None:
    for kind in ("actor", "mesh"):
        status, body = get_json(f"{state.dashboard_url}/api/dashboard/{kind}?{query}")
        assert status == code and body["error"], (kind, query, body)
    status, body = get_json(f"{state.dashboard_url}/api/dashboard/pyspy?actor=1;DROP", "POST")
    assert status == 400 and "decimal integer" in body["error"]


def test_hang_triage_is_the_admin_apis_and_the_token_stays_server_side(
        state: Any, overview: dict[str, Any]) -> None:
    token = urllib.parse.urlsplit(state.admin_url).path.strip("/")
    assert token
    status, ctype, body = get(f"{state.dashboard_url}/api/dashboard/why")
    assert status == 200 and ctype == "application/json"
    assert token not in body.decode()
    status, triage = get_json(f"{state.dashboard_url}/api/dashboard/why")
    assert {"summary", "lines", "meshes", "failed"} <= set(triage)
    assert {(f["mesh"], f["rank"]) for f in triage["failed"]} >= {("doomed", 0), ("doomed", 1)}
    for path in ("/", "/api/dashboard/overview", "/api/dashboard/topology",
                 "/api/dashboard/info", "/static/app.js"):
        assert token not in get(state.dashboard_url + path)[2].decode(), path


def test_pyspy_button_dumps_the_actors_proc_and_keeps_the_dump(
        state: Any, topology: dict[str, Any]) -> None:
    pinger = _actors(topology, "pinger")[0]
    status, reply = get_json(f"{state.dashboard_url}/api/dashboard/pyspy?actor={pinger['id']}",
                             "POST")
    assert status == 200, reply
    result = reply["result"]
    assert set(result) <= {"Ok", "BinaryNotFound", "Failed"} and len(result) == 1
    if "Ok" in result:  # py-spy is installed (the dev extra has it)
        assert result["Ok"]["stack_traces"] and reply["dump_id"]
        rows = state.query_engine_client.query(
            f"SELECT proc_ref FROM pyspy_dumps WHERE dump_id = '{reply['dump_id']}'")["rows"]
        assert rows == [{"proc_ref": reply["proc"]}]
        assert reply["proc"].endswith("@" + pinger["full_name"].rpartition("@")[2])
    status, reply = get_json(f"{state.dashboard_url}/api/dashboard/pyspy?actor=12345", "POST")
    assert status == 404


def test_without_an_admin_api_the_buttons_answer_503_saying_what_to_do() -> None:
    status, _, body = dashboard_admin.why(None)
    assert status == 503 and b"enable_admin" in body
    status, _, body = dashboard_admin.pyspy(None, "pinger[0].proc", None)
    assert status == 503


def test_parse_id_takes_only_unsigned_64_bit_decimals() -> None:
    assert parse_id("18446744073709551615", "actor") == 2**64 - 1
    for bad in (None, "", " ", "0x10", "1e3", "-1", "1 OR 1=1", str(2**64)):
        with pytest.raises(ValueError, match="actor id"):
            parse_id(bad, "actor")
