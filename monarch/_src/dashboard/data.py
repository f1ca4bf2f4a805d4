"""What the dashboard's views show, as SQL over the job's telemetry tables.

Every function takes `query(sql) -> rows` (the job's `QueryEngine` through `rows_of`) and
returns a JSON-ready dict. There is no second data path: the page sees exactly what a user's
own SQL over `state.query_engine_client` would. Ids are 64-bit and JavaScript's numbers are
not, so every id leaves here as a decimal string; an id that comes in (a URL parameter) is
parsed as an integer before it is put into SQL, so no text from a request reaches the engine.

"System" actors are the runtime's own (host and proc agents, the client's root, the telemetry
collectors, the debug controller): counted apart, so the health and the failure list speak of
the user's actors.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "ActivityWindow", "Query", "actor_detail", "mesh_detail", "overview", "parse_id",
    "rows_of", "topology",
]

Query = Callable[[str], list[dict[str, Any]]]

# Mesh classes whose actors are the runtime's, not the user's.
CLIENT_CLASS = "Python<RootClientActor>"
SYSTEM_CLASSES = ("Host", "Proc", CLIENT_CLASS, "Python<TelemetryActor>",
                  "Python<DebugController>", "Python<SourceLoaderController>")
U64_MAX = 2**64 - 1
ACTIVITY_SECS = 120  # the message activity chart's window
ACTIVITY_BUCKET_SECS = 2
RATE_SECS = 10  # messages/s is the mean over this many seconds
DETAIL_MESSAGES = 100  # messages in and out listed for one actor
TOP_ENDPOINTS = 12
MAX_FLOWS = 500  # actor pairs drawn as message edges

# Events recorded in the same microsecond are ordered by their place in the lifecycle (event
# ids are random): an actor that is Stopping and Failed at once is Failed.
_STATUS_RANK = ("CASE new_status WHEN 'Created' THEN 1 WHEN 'Initializing' THEN 2 "
                "WHEN 'Client' THEN 3 WHEN 'Processing' THEN 3 WHEN 'Idle' THEN 4 "
                "WHEN 'Stopping' THEN 5 WHEN 'Stopped' THEN 6 WHEN 'Failed' THEN 7 ELSE 0 END")
# A handler's stage: queued, then active, then complete or failed.
_STAGE = ("CASE status WHEN 'queued' THEN 1 WHEN 'active' THEN 2 WHEN 'complete' THEN 3 "
          "WHEN 'failed' THEN 4 ELSE 0 END")
# Each message's last stage (1-4, as _STAGE).
_FINAL_STAGE = f"(SELECT message_id, MAX({_STAGE}) AS stage FROM message_status_events " \
               "GROUP BY message_id)"
_STAGE_NAMES = {1: "queued", 2: "active", 3: "complete", 4: "failed"}

# The current status of every actor: its latest status event.
_ACTORS_SQL = f"""
SELECT a.id, a.rank, a.full_name, a.display_name, a.mesh_id, a.timestamp_us AS created_us,
       m.class AS mesh_class, m.given_name AS mesh_name,
       s.new_status AS status, s.reason, s.timestamp_us AS status_us
FROM actors a
LEFT JOIN meshes m ON a.mesh_id = m.id
LEFT JOIN (
  SELECT actor_id, new_status, reason, timestamp_us,
         ROW_NUMBER() OVER (PARTITION BY actor_id
                            ORDER BY timestamp_us DESC, {_STATUS_RANK} DESC) AS rn
  FROM actor_status_events
) s ON s.actor_id = a.id AND s.rn = 1
ORDER BY m.given_name, a.rank
"""

_MESHES_SQL = """
SELECT id, timestamp_us, class, given_name, full_name, shape_json, parent_mesh_id
FROM meshes ORDER BY timestamp_us
"""


class ActivityWindow:
    """The time window of the activity chart, fixed per request so every query agrees."""

    def __init__(self, now_us: int | None = None) -> None:
        self.now_us = now_us if now_us is not None else int(time.time() * 1_000_000)
        self.start_us = self.now_us - ACTIVITY_SECS * 1_000_000


def rows_of(engine_query: Callable[[str], Any]) -> Query:
    """`query(sql) -> rows` over a `QueryEngine.query` that returns a pyarrow table."""

    def query(sql: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = engine_query(sql).to_pylist()
        return rows

    return query


def parse_id(text: str | None, what: str) -> int:
    """An entity id from a URL parameter; ValueError (the route answers 400) if it is not an
    unsigned 64-bit integer."""
    if text is None or not text.strip().isdigit():
        raise ValueError(f"The {what} id must be a decimal integer, got {text!r}.")
    value = int(text)
    if value > U64_MAX:
        raise ValueError(f"The {what} id {value} does not fit in 64 bits.")
    return value


def _ids_as_text(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if v is not None and (k == "id" or k.endswith("_id")) else v)
            for k, v in row.items()}


def _is_system(actor: dict[str, Any]) -> bool:
    return actor.get("mesh_class") in SYSTEM_CLASSES or actor.get("mesh_class") is None


def _actor_view(row: dict[str, Any]) -> dict[str, Any]:
    actor = _ids_as_text(row)
    actor["system"] = _is_system(row)
    actor["status"] = row.get("status") or "Unknown"
    return actor


def _actors(query: Query) -> list[dict[str, Any]]:
    return [_actor_view(r) for r in query(_ACTORS_SQL)]


def _meshes(query: Query) -> list[dict[str, Any]]:
    meshes = []
    for row in query(_MESHES_SQL):
        mesh = _ids_as_text(row)
        mesh["system"] = row["class"] in SYSTEM_CLASSES and row["class"] not in ("Host", "Proc")
        mesh["client"] = row["class"] == CLIENT_CLASS
        try:
            inner = json.loads(row["shape_json"]).get("inner", {})
            mesh["shape"] = dict(zip(inner.get("labels", []), inner.get("sizes", []),
                                     strict=False))
        except (ValueError, AttributeError):
            mesh["shape"] = {}
        meshes.append(mesh)
    return meshes


def _health(workload: list[dict[str, Any]], messages: int, failed_messages: int) -> int:
    """0-100: the share of the user's actors not failed, lowered by the share of handlers
    that failed."""
    actors_ok = 1.0 if not workload else \
        sum(a["status"] != "Failed" for a in workload) / len(workload)
    handlers_ok = 1.0 if not messages else 1.0 - failed_messages / messages
    return round(100 * actors_ok * handlers_ok)


def overview(query: Query, window: ActivityWindow | None = None) -> dict[str, Any]:
    """The Overview view: counts, health, message activity, statuses, errors, endpoints."""
    window = window or ActivityWindow()
    actors = _actors(query)
    meshes = _meshes(query)
    workload = [a for a in actors if not a["system"]]
    # Per endpoint: messages received, and how many are at each stage of their handler.
    stage_sums = ", ".join(f"SUM(CASE WHEN st.stage = {n} THEN 1 ELSE 0 END) AS {name}"
                           for n, name in _STAGE_NAMES.items())
    endpoints = query(
        f"SELECT COALESCE(msg.endpoint, '-') AS endpoint, COUNT(*) AS n, {stage_sums} "
        f"FROM messages msg LEFT JOIN {_FINAL_STAGE} st ON st.message_id = msg.id "
        "GROUP BY COALESCE(msg.endpoint, '-') ORDER BY n DESC, endpoint")
    lifecycle = {name: sum(int(e[name] or 0) for e in endpoints)
                 for name in _STAGE_NAMES.values()}
    bucket_us = ACTIVITY_BUCKET_SECS * 1_000_000
    activity = query(
        f"SELECT CAST(timestamp_us / {bucket_us} AS BIGINT) AS bucket, COUNT(*) AS n "
        f"FROM messages WHERE timestamp_us >= {int(window.start_us)} GROUP BY 1")
    by_bucket = {int(r["bucket"]): int(r["n"]) for r in activity}
    first = window.start_us // bucket_us
    series = [{"t_us": b * bucket_us, "n": by_bucket.get(b, 0)}
              for b in range(first, window.now_us // bucket_us + 1)]
    recent = [p for p in series if p["t_us"] >= window.now_us - RATE_SECS * 1_000_000]
    messages = sum(int(e["n"]) for e in endpoints)
    failed_messages = lifecycle["failed"]
    status: dict[str, int] = {}
    for a in workload:
        status[a["status"]] = status.get(a["status"], 0) + 1
    errors = sorted(
        ({"actor_id": a["id"], "mesh": a["mesh_name"], "rank": a["rank"],
          "full_name": a["full_name"], "reason": a["reason"] or "", "at_us": a["status_us"]}
         for a in actors if a["status"] == "Failed"),
        key=lambda e: -(e["at_us"] or 0))
    return {
        "now_us": window.now_us,
        "counts": {
            "host_meshes": sum(m["class"] == "Host" for m in meshes),
            "proc_meshes": sum(m["class"] == "Proc" for m in meshes),
            "actor_meshes": sum(m["class"] not in ("Host", "Proc") for m in meshes),
            "actors": len(actors), "workload_actors": len(workload),
            "system_actors": len(actors) - len(workload),
            "failed_actors": len(errors), "messages": messages,
            "failed_messages": failed_messages,
        },
        "rate_per_s": round(sum(p["n"] for p in recent) / RATE_SECS, 2),
        "health": _health(workload, messages, failed_messages),
        "status": status,
        "lifecycle": lifecycle,
        "activity": {"bucket_secs": ACTIVITY_BUCKET_SECS, "series": series},
        "errors": errors,
        "stopped": [{"actor_id": a["id"], "mesh": a["mesh_name"], "rank": a["rank"],
                     "reason": a["reason"] or "", "at_us": a["status_us"]}
                    for a in workload if a["status"] == "Stopped"][:50],
        "endpoints": [{"endpoint": e["endpoint"], "n": int(e["n"]),
                       "failed": int(e["failed"] or 0)} for e in endpoints[:TOP_ENDPOINTS]],
        "success_pct": round(100 * lifecycle["complete"] / max(1, lifecycle["complete"] +
                                                                lifecycle["failed"]), 1),
    }


def topology(query: Query, flows: bool = False) -> dict[str, Any]:
    """The Topology and Explorer views' entities: every mesh and every actor, with status;
    with `flows`, the message counts between pairs of actors too (the graph's dashed edges,
    the busiest MAX_FLOWS pairs)."""
    value: dict[str, Any] = {"meshes": _meshes(query), "actors": _actors(query)}
    if flows:
        value["flows"] = [_ids_as_text(r) for r in query(
            "SELECT from_actor_id, to_actor_id, COUNT(*) AS n FROM messages "
            f"GROUP BY from_actor_id, to_actor_id ORDER BY n DESC LIMIT {MAX_FLOWS}")]
    return value


def actor_detail(query: Query, actor_id: int) -> dict[str, Any] | None:
    """One actor: its row, mesh, status history and the messages it received and sent."""
    rows = query(f"SELECT * FROM ({_ACTORS_SQL}) WHERE id = {actor_id}")
    if not rows:
        return None
    history = query("SELECT timestamp_us, new_status AS status, reason FROM actor_status_events "
                    f"WHERE actor_id = {actor_id} ORDER BY timestamp_us, {_STATUS_RANK}")
    def messages(column: str, other: str) -> list[dict[str, Any]]:
        found = query(
            f"SELECT msg.id, msg.timestamp_us, msg.endpoint, msg.{other} AS peer_id, "
            f"peer.full_name AS peer, st.stage FROM messages msg "
            f"LEFT JOIN actors peer ON peer.id = msg.{other} "
            f"LEFT JOIN {_FINAL_STAGE} st ON st.message_id = msg.id "
            f"WHERE msg.{column} = {actor_id} ORDER BY msg.timestamp_us DESC "
            f"LIMIT {DETAIL_MESSAGES}")
        out = []
        for row in found:
            message = _ids_as_text(row)
            message["status"] = _STAGE_NAMES.get(message.pop("stage") or 0)
            out.append(message)
        return out

    counts = query(
        f"SELECT SUM(CASE WHEN to_actor_id = {actor_id} THEN 1 ELSE 0 END) AS received, "
        f"SUM(CASE WHEN from_actor_id = {actor_id} THEN 1 ELSE 0 END) AS sent "
        f"FROM messages WHERE to_actor_id = {actor_id} OR from_actor_id = {actor_id}")
    return {
        "kind": "actor", "actor": _actor_view(rows[0]), "history": history,
        "received": messages("to_actor_id", "from_actor_id"),
        "sent": messages("from_actor_id", "to_actor_id"),
        "counts": {"received": int(counts[0]["received"] or 0) if counts else 0,
                   "sent": int(counts[0]["sent"] or 0) if counts else 0},
    }


def mesh_detail(query: Query, mesh_id: int) -> dict[str, Any] | None:
    """One mesh: its row, its parent chain, the meshes under it and its actors."""
    meshes = {m["id"]: m for m in _meshes(query)}
    mesh = meshes.get(str(mesh_id))
    if mesh is None:
        return None
    parents: list[dict[str, Any]] = []
    parent = mesh.get("parent_mesh_id")
    while parent is not None and parent in meshes and len(parents) < 16:
        parents.append(meshes[parent])
        parent = meshes[parent].get("parent_mesh_id")
    actors = [_actor_view(r) for r in
              query(f"SELECT * FROM ({_ACTORS_SQL}) WHERE mesh_id = {mesh_id} ORDER BY rank")]
    casts = query(f"SELECT COUNT(*) AS n FROM sent_messages WHERE actor_mesh_id = {mesh_id}")
    return {
        "kind": "mesh", "mesh": mesh, "parents": parents,
        "children": [m for m in meshes.values() if m.get("parent_mesh_id") == mesh["id"]],
        "actors": actors, "casts": int(casts[0]["n"]) if casts else 0,
    }
