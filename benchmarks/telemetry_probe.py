"""The same observability probe on this implementation and on torchmonarch 0.7.0.

    .venv/bin/python benchmarks/telemetry_probe.py                      # ours
    benchmarks/.venv-torchmonarch/bin/python benchmarks/telemetry_probe.py   # torchmonarch

A `ProcessJob({"hosts": 1})` with `enable_telemetry(TelemetryConfig(include_dashboard=True))`
(and the mesh admin API it brings), two actors, 20 `call`s; then, as a user would: the table
catalog (information_schema), status counts, the number of messages the workers handled, the
dashboard page (status and title) and the admin API's tree. Prints one JSON object.
The load is `_report`'s `load_avg_1m_before`/`load_avg_1m_after` (reports before it named
the same 1-minute averages `load_before`/`load_after`).
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from typing import Any

from _report import load_after, load_before

from monarch.actor import Actor, endpoint
from monarch.config import configured
from monarch.job import ProcessJob, TelemetryConfig

CALLS = 20


class ProbeWorker(Actor):
    @endpoint
    def ping(self, x: int) -> int:
        return x + 1


def _rows(client: Any, sql: str, ready: Any = bool, timeout: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        rows: list[Any] = client.query(sql)["rows"]
        if ready(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def _get(url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=30) as resp:
        return resp.status, resp.read().decode(errors="replace")


def main() -> None:
    report: dict[str, Any] = {"benchmark": "telemetry_probe", "python": sys.executable,
                              **load_before()}
    with configured(mesh_admin_addr="[::]:0"):
        job = ProcessJob({"hosts": 1}).enable_telemetry(
            TelemetryConfig(include_dashboard=True, dashboard_port=0))
        start = time.monotonic()
        state = job.state(cached_path=None)
        report["state_s"] = round(time.monotonic() - start, 2)
        try:
            workers = state.hosts.spawn_procs(per_host={"workers": 2}).spawn("probe", ProbeWorker)
            for i in range(CALLS):
                workers.ping.call(i).get()
            client = state.query_engine_client
            tables = _rows(client, "SELECT table_name FROM information_schema.tables "
                                   "WHERE table_schema = 'public' ORDER BY table_name")
            report["tables"] = [r["table_name"] for r in tables]
            report["status_counts"] = {r["new_status"]: r["n"] for r in _rows(
                client, "SELECT new_status, COUNT(*) AS n FROM actor_status_events "
                        "GROUP BY new_status")}
            handled = _rows(client, "SELECT COUNT(*) AS n FROM messages m JOIN actors a ON "
                                    "m.to_actor_id = a.id JOIN meshes mesh ON a.mesh_id = "
                                    "mesh.id WHERE mesh.given_name = 'probe' AND m.endpoint "
                                    "= 'ping'", lambda r: r[0]["n"] >= 2 * CALLS)
            report["ping_messages_handled"] = handled[0]["n"]
            report["fields"] = {"query_engine": state.query_engine is not None,
                                "query_engine_client": state.query_engine_client is not None,
                                "dashboard_url": bool(state.dashboard_url),
                                "admin_url": bool(state.admin_url)}
            status, page = _get(state.dashboard_url)
            title = re.search(r"<title>(.*?)</title>", page, re.S)
            report["dashboard"] = {"status": status,
                                   "title": title.group(1).strip() if title else None}
            admin = state.admin_url.replace("[::]", "localhost")
            _, tree = _get(f"{admin.rstrip('/')}/v1/tree")
            report["admin_tree_lines"] = len(tree.splitlines())
            _, root = _get(f"{admin.rstrip('/')}/v1/root")
            report["admin_root_keys"] = sorted(json.loads(root))
        finally:
            for host_mesh in state._hosts.values():
                host_mesh.shutdown().get(timeout=30)
    report.update(load_after())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
