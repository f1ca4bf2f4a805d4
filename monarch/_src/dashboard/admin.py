"""The dashboard's two questions to the mesh admin API, asked by the server, not the page.

The admin URL carries the API's token (a capability URL), so the page must never see it: the
page calls the dashboard's own routes and this module forwards them. An admin API that is
absent or does not answer is a 503 naming what to do, never a hang (bounded timeouts).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["pyspy", "why"]

WHY_TIMEOUT_SECS = 60.0  # triage asks every proc, each bounded by the admin's own timeout
PYSPY_TIMEOUT_SECS = 30.0

Reply = tuple[int, str, bytes]


def _json(status: int, value: Any) -> Reply:
    return status, "application/json", json.dumps(value, default=str).encode()


def _no_admin() -> Reply:
    return _json(503, {"error": "The mesh admin API is not running for this job: call "
                                "job.enable_admin() (enable_telemetry does by default)."})


def _get(admin_url: str, route: str, timeout: float) -> tuple[int, Any]:
    """GET `admin_url` + `route`: (HTTP status, decoded JSON). The admin's own errors
    (`{"error": {"message": ...}}`) come back with their status."""
    try:
        with urllib.request.urlopen(admin_url + route, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        try:
            body = json.loads(err.read())
        except ValueError:
            body = {}
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        return err.code, {"error": message or f"the admin API answered {err.code}"}
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        return 503, {"error": f"The mesh admin API did not answer: {err}."}


def why(admin_url: str | None, py_spy: bool = False) -> Reply:
    """Hang triage (`/v1/why`): every rank's stacks and calls in flight, grouped."""
    if admin_url is None:
        return _no_admin()
    status, body = _get(admin_url, "/v1/why" + ("?py_spy=1" if py_spy else ""),
                        WHY_TIMEOUT_SECS)
    return _json(status, body)


def _admin_proc_ref(admin_url: str, full_name: str) -> str | None:
    """The admin API's reference of the proc hosting the actor named `full_name`.

    The telemetry names a proc by its runtime id and the admin API by mesh and rank, but both
    end in the proc's address (`...@tcp://host:port`), unique per live proc: walk the admin's
    root and hosts for the proc reference with the same address."""
    address = full_name.rpartition("@")[2]
    if not address:
        return None
    status, root = _get(admin_url, "/v1/root", PYSPY_TIMEOUT_SECS)
    if status != 200:
        return None
    for host in root.get("children", []):
        status, node = _get(admin_url, "/v1/" + urllib.parse.quote(host, safe=""),
                            PYSPY_TIMEOUT_SECS)
        if status != 200:
            continue
        for proc in node.get("children", []):
            if isinstance(proc, str) and proc.endswith("@" + address):
                return proc
    return None


def pyspy(admin_url: str | None, actor_full_name: str,
          store: Callable[[str, str, str], Any] | None) -> Reply:
    """A py-spy dump of the proc of the actor named `actor_full_name`; kept in the `pyspy_*`
    tables through `store` when it succeeded."""
    if admin_url is None:
        return _no_admin()
    proc = _admin_proc_ref(admin_url, actor_full_name)
    if proc is None:
        return _json(404, {"error": f"The mesh admin API knows no live proc of actor "
                                    f"{actor_full_name}: it stopped, or belongs to another "
                                    "client."})
    status, body = _get(admin_url, "/v1/pyspy/" + urllib.parse.quote(proc, safe=""),
                        PYSPY_TIMEOUT_SECS)
    if status != 200:
        return _json(status, body)
    result: dict[str, Any] = {"result": body, "proc": proc, "dump_id": None}
    if store is not None and isinstance(body, dict) and "Ok" in body:
        dump_id = uuid.uuid4().hex
        store(dump_id, proc, json.dumps(body))
        result["dump_id"] = dump_id
    return _json(200, result)
