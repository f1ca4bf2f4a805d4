"""Starting the mesh admin API: `spawn_admin` (torchmonarch's `_spawn_admin`) and what
`JobTrait.enable_admin` calls.

The API is served by this process's control server (`server.py`), which answers HTTP on its
port (`http.py`): starting the admin starts that server if it is not running, on `admin_addr`
when given, else on `mesh_admin_addr`, else on `MONARCH_DEBUG_SERVER_HOST`/`_PORT`. A process
has one server: asking again returns the running one (a different `admin_addr` is then
refused, since it cannot be honoured). The whole client is served, not only `host_meshes`: they
are checked (at least one) as Monarch does, and the tree shows every mesh of this client.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

__all__ = ["AdminRef", "admin_url", "spawn_admin", "start_admin"]


class AdminRef(NamedTuple):
    """The running admin API (what torchmonarch's opaque `PyMeshAdminRef` stands for)."""

    url: str  # the base URL, token included
    host: str  # where it listens
    port: int
    telemetry_url: str | None  # the telemetry dashboard it points to, if any


def admin_url() -> str | None:
    """The admin API's URL in this process, if it is served."""
    from monarch._src.admin.server import ControlServer

    running = ControlServer.running()
    return None if running is None else running.url


def start_admin(admin_addr: str | None = None, telemetry_url: str | None = None,
                announce: bool = True) -> AdminRef:
    """Serve the admin API from this process (the root client) and return where."""
    from monarch._src.admin import http
    from monarch._src.admin.server import ControlServer, parse_admin_addr
    from monarch._src.lowlevel import get_runtime

    rt = get_runtime()
    if not rt.is_controller:
        raise RuntimeError("The mesh admin API is served by the root client; start it there "
                           "(job.enable_admin() then job.state(), or _spawn_admin([...])).")
    host: str | None = None
    port: int | None = None
    if admin_addr:
        host, port = parse_admin_addr(admin_addr)
    running = ControlServer.running()
    if running is not None and host is not None and port is not None and port != 0 and (
            running.port != port):
        raise ValueError(
            f"The mesh admin API of this client already listens on {running.host}:"
            f"{running.port}; it cannot also listen on admin_addr {admin_addr!r}. Use "
            f"{running.url} or leave admin_addr unset.")
    server = running or ControlServer.start(None, host, port)
    if telemetry_url is not None:
        http.set_telemetry_url(telemetry_url)
    if announce and running is None:
        base = server.url
        sys.stderr.write(f"Mesh admin server listening on {base}\n"
                         f"  - Root node:     curl {base}/v1/root\n"
                         f"  - Mesh tree:     curl {base}/v1/tree\n"
                         f"  - Hang triage:   curl {base}/v1/why   (or: monarch why)\n"
                         f"  - API docs:      curl {base}/SKILL.md\n")
    return AdminRef(server.url, server.host, server.port, http.telemetry_url)


def spawn_admin(host_meshes: list[Any], admin_addr: str | None = None,
                telemetry_url: str | None = None) -> Any:
    """torchmonarch's `_spawn_admin`: a Future of `(admin_url, admin_ref)`."""
    from monarch._src.lowlevel import Future

    if not host_meshes:
        raise ValueError("_spawn_admin requires at least one HostMesh.")
    try:
        ref = start_admin(admin_addr, telemetry_url)
    except (OSError, ValueError, RuntimeError) as exc:
        return Future.from_exception(exc)
    return Future.from_value((ref.url, ref))
