"""The mesh admin HTTP API: Monarch's `/v1/...` routes, served on the control server's port.

The control server (`server.py`) reads the first line of each connection: a JSON object is a
control request (`monarch debug`), anything else an HTTP request line, handed to `serve_http`
here with the connection (TLS already done). One listener, one address (`mesh_admin_addr`), one
token and one TLS set-up for both; the alternative, a second `ThreadingHTTPServer` on another
port, would have needed a second address to configure, publish and secure.

Authentication: the server's token, either as the first path segment (the admin URL is a
capability URL, `http://host:port/<token>`, so `f"{admin_url}/v1/root"` and `curl` work as
they are) or in an `Authorization: Bearer <token>` header (then the paths have no prefix). A
request without it gets 401 and the refusal is logged with the peer's address. Under
`enable_tls` the connection is mutual TLS, so the token never crosses the network in clear.

Routes (GET unless said; the JSON shapes of Monarch's API where it has the route):

* `/v1/root`, `/v1/{reference}` (url-encoded): a node (`nodes.py`); `/v1/tree`: the whole tree
  as text, one line per node with its URL; `/v1/admin`: who serves.
* `/v1/pyspy/{proc reference}`: py-spy's dump of a proc (`{"Ok": ...}`, `{"BinaryNotFound":
  ...}` or `{"Failed": ...}`); `/v1/stacks/{proc or actor reference}` (or
  `/v1/stacks?mesh=M&rank=R`): every thread's Python stack and py-spy's text of its proc,
  what `monarch stacks` prints.
* `/v1/health`: a probe of every node (pass, slow or fail, with its latency).
* `/v1/why`: hang triage (`why.py`): stacks and calls in flight of every rank, grouped.
* `/v1/snapshot`: the snapshot `monarch top` draws (`model.collect`).
* `/SKILL.md`: how to use this API, for people and agents.
* `POST /v1/query`: SQL over the telemetry tables, once the telemetry feature registers its
  handler with `set_query_handler`; else 404, as Monarch answers without a dashboard.

Errors are `{"error": {"code": ..., "message": ...}}` with Monarch's codes (`not_found`,
`bad_request`, `gateway_timeout`, `internal_error`, and `unauthorized` for a missing token).
"""

from __future__ import annotations

import hmac
import http.server
import json
import logging
import socket
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

__all__ = ["serve_http", "set_query_handler", "set_telemetry_url"]

logger = logging.getLogger(__name__)

_SLOW_PROBE = 1.0  # seconds past which a health probe is "slow"
QueryHandler = Callable[[dict[str, Any]], dict[str, Any]]
_query_handler: QueryHandler | None = None
telemetry_url: str | None = None  # the telemetry dashboard's URL, shown by /v1/admin


def set_telemetry_url(url: str | None) -> None:
    """The job's telemetry URL (dashboard and SQL API) that `/v1/admin` shows; None: none."""
    global telemetry_url
    telemetry_url = url


def set_query_handler(handler: QueryHandler | None) -> None:
    """Serve `POST /v1/query` with `handler(request body) -> {"rows": [...]}` (the telemetry
    feature registers its query engine here); None: answer 404."""
    global _query_handler
    _query_handler = handler


class _ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class _Handler(http.server.BaseHTTPRequestHandler):
    """One HTTP connection (keep-alive) on a control-server connection."""

    protocol_version = "HTTP/1.1"
    server_version = "monarch-admin"
    token: str
    base: str  # the admin URL, token included

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("monarch admin http: " + format, *args)

    # -- plumbing -----------------------------------------------------------------------------

    def _reply(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        self._reply(status, json.dumps(value).encode(), "application/json")

    def _error(self, err: _ApiError) -> None:
        self._json(err.status, {"error": {"code": err.code, "message": err.message}})

    def _route_path(self) -> str:
        """The path after authentication (the token prefix removed); `_ApiError` if none."""
        path = urllib.parse.urlsplit(self.path).path
        head, _, rest = path.lstrip("/").partition("/")
        if hmac.compare_digest(head.encode(), self.token.encode()):
            return "/" + rest
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].strip().encode(),
                                                              self.token.encode()):
            return path
        logger.warning("monarch: refused an admin HTTP request from %s: no valid token",
                       self.client_address)
        raise _ApiError(401, "unauthorized",
                        "This monarch admin API needs its token: use the admin URL as given "
                        "(job.state().admin_url, or admin_url in .monarch/controller-<pid>.json) "
                        "or send 'Authorization: Bearer <token>'.")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        try:
            path = self._route_path()
            if method == "POST":
                self._post(path)
            else:
                self._get(path)
        except _ApiError as err:
            self._error(err)
        except (ConnectionError, BrokenPipeError):
            raise
        except TimeoutError as exc:
            self._error(_ApiError(504, "gateway_timeout", str(exc)))
        except Exception as exc:  # answered as an error: the server lives on
            logger.warning("monarch admin http: %s failed", self.path, exc_info=True)
            self._error(_ApiError(500, "internal_error", f"{type(exc).__name__}: {exc}"))

    # -- routes -------------------------------------------------------------------------------

    def _get(self, path: str) -> None:
        from monarch._src.admin.nodes import Topology

        if path == "/SKILL.md":
            from monarch._src.admin.skill import SKILL_MD

            self._reply(200, SKILL_MD.format(base=self.base).encode(),
                        "text/markdown; charset=utf-8")
            return
        if not path.startswith("/v1/"):
            raise _ApiError(404, "not_found", f"No route {path}; start at /v1/root or read "
                                              "/SKILL.md.")
        route = path[len("/v1/"):]
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if route == "admin":
            self._json(200, _admin_info(self.base))
        elif route == "tree":
            self._reply(200, _tree_text(Topology(), self.base).encode(),
                        "text/plain; charset=utf-8")
        elif route == "health":
            self._json(200, _health())
        elif route == "why":
            from monarch._src.admin.why import triage

            self._json(200, triage(py_spy="py_spy" in query))
        elif route == "snapshot":
            from monarch._src.admin.model import collect

            self._json(200, collect())
        elif route.startswith("pyspy/"):
            self._json(200, _pyspy(_proc_of(urllib.parse.unquote(route[6:]))))
        elif route == "stacks" or route.startswith("stacks/"):
            from monarch._src.admin.stacks import dump_stacks

            address = _proc_of(urllib.parse.unquote(route[7:])) if route != "stacks" else \
                _proc_of_rank(query)
            self._json(200, dump_stacks(address, py_spy="no_py_spy" not in query).to_dict())
        elif route in ("query", "schema", "schema/admin", "schema/error", "openapi.json") or \
                route.startswith(("config/", "pyspy_dump/", "pyspy_profile_svg/")):
            raise _ApiError(404, "not_found",
                            f"/v1/{route} is not served by this implementation; see /SKILL.md "
                            "for the routes it has.")
        else:
            ref = urllib.parse.unquote(route)
            payload = Topology().resolve(ref)
            if payload is None:
                raise _ApiError(404, "not_found",
                                f"No node {ref!r} in this mesh; start at /v1/root and follow "
                                "children.")
            self._json(200, payload)

    def _post(self, path: str) -> None:
        if path != "/v1/query":
            raise _ApiError(404, "not_found", f"No POST route {path}; POST /v1/query only.")
        handler = _query_handler
        if handler is None:
            raise _ApiError(404, "not_found",
                            "dashboard not configured: enable telemetry (job.enable_telemetry()) "
                            "to query its tables.")
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as exc:
            raise _ApiError(400, "bad_request", f"The body is not JSON: {exc}.") from exc
        if not isinstance(body, dict) or not isinstance(body.get("sql"), str):
            raise _ApiError(400, "bad_request", 'POST /v1/query expects {"sql": "SELECT ..."}.')
        self._json(200, handler(body))


def serve_http(conn: Any, first_line: bytes) -> None:
    """Serve the HTTP requests of a control-server connection whose first line was
    `first_line` (`conn` is the control server's stream handler: its socket, files, server)."""
    handler = _Handler.__new__(_Handler)  # bound to a connection already open, not a server
    handler.request = conn.request
    handler.client_address = conn.client_address
    handler.server = conn.server
    handler.rfile = conn.rfile
    handler.wfile = conn.wfile
    handler.token = conn.server.token
    handler.base = conn.server.url
    handler.close_connection = True
    handler.raw_requestline = first_line  # type: ignore[attr-defined]
    if handler.parse_request():
        run = getattr(handler, f"do_{handler.command}", None)
        if run is None:
            handler._error(_ApiError(405, "bad_request",
                                     f"Method {handler.command} is not allowed here."))
        else:
            run()
        handler.wfile.flush()
    while not handler.close_connection:
        handler.handle_one_request()


def _admin_info(base: str) -> dict[str, Any]:
    from monarch._src.lowlevel import get_runtime

    rt = get_runtime()
    host = urllib.parse.urlsplit(base).hostname or socket.gethostname()
    return {"actor_id": f"admin.{rt.proc_id}@{rt.address}",
            "proc_id": f"{rt.proc_id}@{rt.address}", "host": host, "url": base,
            "telemetry_url": telemetry_url}


def _proc_of(ref: str) -> str:
    """The address of the proc of a proc or actor reference."""
    from monarch._src.admin.nodes import Topology

    topo = Topology()
    proc = topo.procs.get(ref)
    if proc is None:
        found = topo.find_actor(ref)
        if found is None:
            raise _ApiError(404, "not_found", f"No proc or actor {ref!r} in this mesh.")
        proc = found[0]
    if not proc.address or proc.state in ("failed", "stopped"):
        raise _ApiError(404, "not_found", f"The proc {ref!r} is {proc.state}: it has no stacks.")
    return proc.address


def _proc_of_rank(query: dict[str, list[str]]) -> str:
    """The address of the proc of `?mesh=M&rank=R` (an actor or proc mesh's name, or
    `client`), as `monarch stacks MESH RANK` names it."""
    from monarch._src.admin.model import find_proc

    mesh = query.get("mesh", [""])[0]
    try:
        rank = int(query.get("rank", ["0"])[0])
    except ValueError:
        raise _ApiError(400, "bad_request", "rank must be an integer.") from None
    try:
        return find_proc(mesh, rank)
    except LookupError as exc:
        raise _ApiError(404, "not_found", str(exc)) from None
    except (ValueError, RuntimeError) as exc:
        raise _ApiError(400, "bad_request", str(exc)) from None


def _pyspy(address: str) -> dict[str, Any]:
    """Monarch's `PySpyResult` for the proc at `address`."""
    from monarch._src.admin.stacks import dump_stacks

    dump = dump_stacks(address, py_spy=True, py_spy_json=True)
    if dump.py_spy is None:
        if dump.py_spy_note in ("not installed",) or dump.py_spy_note.startswith("pyspy_bin"):
            return {"BinaryNotFound": {"searched": ["pyspy_bin config", "py-spy on PATH",
                                                    "py-spy next to the interpreter"]}}
        return {"Failed": {"pid": dump.pid, "binary": "py-spy", "exit_code": None,
                           "stderr": dump.py_spy_note}}
    try:
        threads = json.loads(dump.py_spy)
    except ValueError:
        threads = []
    traces = [{"pid": dump.pid, "thread_id": t.get("thread_id", 0),
               "thread_name": t.get("thread_name"), "os_thread_id": t.get("os_thread_id"),
               "active": bool(t.get("active", False)), "owns_gil": bool(t.get("owns_gil", False)),
               "frames": [{"name": f.get("name", ""), "filename": f.get("filename", ""),
                           "module": f.get("module"), "short_filename": f.get("short_filename"),
                           "line": f.get("line", 0), "locals": f.get("locals"),
                           "is_entry": bool(f.get("is_entry", False))}
                          for f in t.get("frames", [])]}
              for t in threads if isinstance(t, dict)]
    return {"Ok": {"pid": dump.pid, "binary": "py-spy", "capture_mode": "nonblocking",
                   "stack_traces": traces, "warnings": []}}


def _tree_text(topo: Any, base: str) -> str:
    """The tree as text: each node with the URL of its payload."""

    def url(ref: str) -> str:
        return f"{base}/v1/{urllib.parse.quote(ref, safe='')}"

    lines: list[str] = []
    for host, refs in topo.hosts.items():
        if not refs:
            continue
        lines.append(f"{host}  ->  {url('host:' + host)}")
        for i, ref in enumerate(refs):
            proc = topo.procs[ref]
            last_proc = i == len(refs) - 1
            lines.append(f"{'└── ' if last_proc else '├── '}{proc.proc_id} [{proc.state}]  ->  "
                         f"{url(ref)}")
            topo.ask(proc)
            actors = list(proc.actors.values())
            pad = "    " if last_proc else "│   "
            for j, actor in enumerate(actors):
                branch = "└── " if j == len(actors) - 1 else "├── "
                lines.append(f"{pad}{branch}{actor.name}[{actor.rank}]  ->  "
                             f"{url(topo.actor_ref(proc, actor))}")
    return "\n".join(lines) + "\n"


def _health() -> dict[str, Any]:
    """A probe of every node: the admin itself, each host, each proc (an introspection round
    trip) and each actor (its state from that answer)."""
    from monarch._src.admin.nodes import Topology, actor_state

    checks: list[dict[str, Any]] = []
    t0 = time.monotonic()
    topo = Topology()
    checks.append({"ref": "root", "kind": "root", "status": "pass",
                   "latency_ms": round((time.monotonic() - t0) * 1000, 2), "detail": ""})
    for host, refs in topo.hosts.items():
        if not refs:
            continue
        procs = [topo.procs[r] for r in refs]
        host_checks: list[dict[str, Any]] = []
        for proc in procs:
            start = time.monotonic()
            answer = topo.ask(proc)
            latency = time.monotonic() - start
            if proc.state == "stopped":  # what its owner did: not a fault
                status, detail = "pass", "stopped"
            elif answer is None:
                status, detail = "fail", proc.error or proc.state
            else:
                status, detail = ("slow" if latency > _SLOW_PROBE else "pass"), ""
            host_checks.append({"ref": proc.ref, "kind": "proc", "status": status,
                                "latency_ms": round(latency * 1000, 2), "detail": detail})
            for actor in proc.actors.values():
                state = actor_state(actor)
                bad = state == "failed" or (answer is None and state != "stopped")
                host_checks.append({
                    "ref": topo.actor_ref(proc, actor), "kind": "actor",
                    "status": "fail" if bad else "pass", "latency_ms": 0.0,
                    "detail": actor.report or (state if state != "running" else "")})
        reachable = any(c["kind"] == "proc" and c["status"] != "fail" for c in host_checks) \
            or all(topo.procs[r].state == "stopped" for r in refs)
        checks.append({"ref": f"host:{host}", "kind": "host",
                       "status": "pass" if reachable else "fail", "latency_ms": 0.0,
                       "detail": "" if reachable else "no proc on this host answers"})
        checks += host_checks
    counts = {s: sum(1 for c in checks if c["status"] == s) for s in ("pass", "slow", "fail")}
    return {"healthy": counts["fail"] == 0, "counts": counts, "checks": checks}
