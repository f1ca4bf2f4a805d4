"""The dashboard's HTTP routes, mounted on a job's telemetry server.

`mount(server, query, admin_url, store_pyspy)` adds, to a server with `add_route` (the job's
`TelemetryServer`):

* `GET /` and `GET /static/<file>`: the page (`static/`, shipped as package data);
* `GET /api/dashboard/overview`, `/topology` (`?flows=1`: with message counts between
  actors), `/actor?id=N`, `/mesh?id=N`: the views' data
  (`data.py`, SQL through the job's engine);
* `GET /api/dashboard/why`: hang triage, and `POST /api/dashboard/pyspy?actor=N`: a py-spy
  dump of the actor's proc, both asked of the mesh admin API by this server (`admin.py`), so
  the admin token never reaches the page.

Every route answers JSON; a bad parameter is a 400 naming it, an unknown entity a 404.
"""

from __future__ import annotations

import json
import mimetypes
import urllib.parse
from collections.abc import Callable
from importlib import resources
from typing import Any

from monarch._src.dashboard import admin, data

__all__ = ["mount"]

Reply = tuple[int, str, bytes]
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml"}


def _json(status: int, value: Any) -> Reply:
    return status, "application/json", json.dumps(value, default=str).encode()


def _param(request: dict[str, Any], name: str) -> str | None:
    values = urllib.parse.parse_qs(request.get("query") or "").get(name)
    return values[0] if values else None


def _static(name: str) -> Reply:
    """A file of `static/`; only plain names below it (no `..`, no hidden files)."""
    parts = [p for p in name.split("/") if p]
    if not parts or any(p.startswith(".") or "\\" in p for p in parts):
        return _json(404, {"error": f"no static file {name!r}"})
    node = resources.files("monarch._src.dashboard").joinpath("static", *parts)
    if not node.is_file():
        return _json(404, {"error": f"no static file {name!r}"})
    suffix = "." + parts[-1].rpartition(".")[2]
    ctype = STATIC_TYPES.get(suffix) or mimetypes.guess_type(parts[-1])[0] or \
        "application/octet-stream"
    return 200, ctype, node.read_bytes()


def mount(server: Any, query: data.Query, admin_url: str | None,
          store_pyspy: Callable[[str, str, str], Any] | None = None) -> None:
    """Serve the dashboard on `server` (see the module doc). `query(sql) -> rows` runs SQL on
    the job's telemetry; `admin_url` is the mesh admin API's URL, token included (None: the
    triage and py-spy buttons answer 503); `store_pyspy(dump_id, proc_ref, result_json)` keeps
    a py-spy dump in the `pyspy_*` tables."""

    def view(build: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Reply]:
        def handle(request: dict[str, Any]) -> Reply:
            try:
                value = build(request)
            except ValueError as err:
                return _json(400, {"error": str(err)})
            if value is None:
                return _json(404, {"error": "no such entity in the telemetry (yet)"})
            return _json(200, value)
        return handle

    def static(request: dict[str, Any]) -> Reply:
        path = request["path"]
        if not path.startswith("/static/"):
            return _json(404, {"error": f"no route GET {path}"})
        return _static(path[len("/static/"):])

    def why(request: dict[str, Any]) -> Reply:
        return admin.why(admin_url, py_spy=_param(request, "py_spy") is not None)

    def pyspy(request: dict[str, Any]) -> Reply:
        actor_id = data.parse_id(_param(request, "actor"), "actor")
        rows = query(f"SELECT full_name FROM actors WHERE id = {actor_id}")
        if not rows:
            return _json(404, {"error": f"no actor {actor_id} in the telemetry"})
        return admin.pyspy(admin_url, rows[0]["full_name"], store_pyspy)

    def pyspy_checked(request: dict[str, Any]) -> Reply:
        try:
            return pyspy(request)
        except ValueError as err:
            return _json(400, {"error": str(err)})

    routes: dict[tuple[str, str], Callable[[dict[str, Any]], Reply]] = {
        ("GET", "/"): lambda _: _static("index.html"),
        ("GET", "/index.html"): lambda _: _static("index.html"),
        ("GET", "*"): static,
        ("GET", "/api/dashboard/overview"): view(lambda _: data.overview(query)),
        ("GET", "/api/dashboard/topology"): view(
            lambda r: data.topology(query, flows=_param(r, "flows") is not None)),
        ("GET", "/api/dashboard/actor"): view(
            lambda r: data.actor_detail(query, data.parse_id(_param(r, "id"), "actor"))),
        ("GET", "/api/dashboard/mesh"): view(
            lambda r: data.mesh_detail(query, data.parse_id(_param(r, "id"), "mesh"))),
        ("GET", "/api/dashboard/why"): why,
        ("POST", "/api/dashboard/pyspy"): pyspy_checked,
        ("GET", "/api/dashboard/info"): lambda _: _json(200, {"admin": admin_url is not None}),
    }
    for (method, path), handler in routes.items():
        server.add_route(method, path, handler)
