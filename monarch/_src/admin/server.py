"""The root client's control server: what `monarch debug`, `monarch stacks`, `monarch top`,
`monarch why` and HTTP clients of the mesh admin API (`curl`, the dashboard) talk to.

A threaded TCP server on the `mesh_admin_addr` config key ('host:port'), else on
`MONARCH_DEBUG_SERVER_HOST` (default `localhost`) and `MONARCH_DEBUG_SERVER_PORT` (default 27000;
when that port is taken, any free one); one per process (`ControlServer.start` returns the one
running). It starts with the debugger (`debug_controller()`, a breakpoint) or the admin API
(`job.enable_admin()`, `_spawn_admin`). Its address, token and admin URL are published in
`.monarch/controller-<pid>.json` under the client's working directory (removed at exit), which
is how the CLI finds a client without flags.

Each connection speaks one of two protocols, told apart by its first line: an HTTP request line
is the mesh admin API (`http.py`); a JSON object is a control request (JSON lines, one request
per connection), which carries the server's token (`"token": t`):

* `{"op": "list"}` -> `{"sessions": [...]}` (paused actors)
* `{"op": "attach", "name": n, "rank": r}` -> a stream of `{"out": text, "input": bool}`; the
  client answers each `"input": true` with `{"line": command}`; ends with `{"end": reason}`
* `{"op": "stacks", "mesh": m, "rank": r}` -> `{"dump": {...}}`
* `{"op": "snapshot"}` -> `{"snapshot": {...}}` (see `model.collect`)

Any failure is answered `{"error": message}`. The server is plain stdlib (`socketserver`) on its
own threads, apart from the runtime loop, so a slow client never delays message routing.

Whoever may send requests can run code in any actor (a debugger), so every request must carry
the token: 32 random bytes made when the server starts and written only to the published file,
which is created with mode 0600 (readable by its owner alone), and into the admin URL the job
returns. A request without it gets no answer (HTTP: 401): the refusal is logged with the
peer's address. With TLS on (`enable_tls`), the server speaks mutual TLS with the configured
certificates (`transport.tls.ssl_contexts`), for both protocols, so the token never crosses the
network in clear. It listens on loopback by default; binding another interface is the user's
explicit choice.
"""

from __future__ import annotations

import atexit
import glob
import hmac
import json
import logging
import os
import re
import secrets
import socket
import socketserver
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

__all__ = ["DEFAULT_PORT", "ControlServer", "server_address_from_env", "sweep_dead"]

logger = logging.getLogger(__name__)

DEFAULT_PORT = 27000
# "GET /path HTTP/1.1": what sends a connection to the HTTP admin API; anything else is a
# control request (refused unless it is JSON with the token).
_HTTP_REQUEST_LINE = re.compile(rb"^[A-Z]{3,7} /\S* HTTP/1\.[01]\r?\n$")
_READ_TIMEOUT = 600.0  # a connected client idle this long is dropped


def server_address_from_env() -> tuple[str, int]:
    """(host, port) from the `mesh_admin_addr` config key ('host:port', '[v6]:port'), else
    `MONARCH_DEBUG_SERVER_HOST`/`MONARCH_DEBUG_SERVER_PORT`, else the defaults."""
    from monarch._src.config import get as config_get

    configured = config_get("mesh_admin_addr")
    if configured:
        return parse_admin_addr(str(configured))
    host = os.environ.get("MONARCH_DEBUG_SERVER_HOST", "localhost")
    raw = os.environ.get("MONARCH_DEBUG_SERVER_PORT", str(DEFAULT_PORT))
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"MONARCH_DEBUG_SERVER_PORT must be a port number, got {raw!r}.") from None
    return host, port


def parse_admin_addr(text: str) -> tuple[str, int]:
    """'host:port' or '[ipv6]:port' -> (host, port); ValueError naming mesh_admin_addr."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]") if host.startswith("[") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(
            f"mesh_admin_addr must be 'host:port' (e.g. 'localhost:27000' or '[::]:1729'), "
            f"got {text!r}."
        )
    return host, int(port)


class _Handler(socketserver.StreamRequestHandler):
    server: _TCPServer

    def setup(self) -> None:
        self.request.settimeout(_READ_TIMEOUT)
        if self.server.ssl_context is not None:
            # Here, on the handler's thread: a slow or failed handshake holds up no one else.
            self.request = self.server.ssl_context.wrap_socket(self.request, server_side=True)
        super().setup()

    def _send(self, msg: dict[str, Any]) -> None:
        self.wfile.write((json.dumps(msg) + "\n").encode())
        self.wfile.flush()

    def handle(self) -> None:
        try:
            line = self.rfile.readline()
            if not line:
                return
            if _HTTP_REQUEST_LINE.match(line):  # the admin API
                from monarch._src.admin.http import serve_http

                serve_http(self, line)
                return
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            token = request.get("token") if isinstance(request, dict) else None
            if not isinstance(token, str) or not hmac.compare_digest(token, self.server.token):
                logger.warning("monarch: refused a control connection from %s: no valid token",
                               self.client_address)
                return
            op = request.get("op")
            handler = getattr(self, f"_op_{op}", None)
            if handler is None:
                self._send({"error": f"Unknown operation {op!r}; use list, attach, stacks or "
                                     "snapshot."})
                return
            try:
                handler(request)
            except Exception as exc:  # answered; if the client is gone, sending fails too
                self._send({"error": f"{type(exc).__name__}: {exc}"})
        except OSError as exc:  # the client went away, or failed the TLS handshake
            logger.debug("monarch: control client dropped: %s", exc)

    def _debugger(self) -> Any:
        controller = self.server.controller
        if controller is None:
            raise RuntimeError("This client has no debugger running: call "
                               "monarch.actor.debug_controller() in it (a breakpoint() in an "
                               "actor starts it too).")
        return controller

    def _op_list(self, request: dict[str, Any]) -> None:
        self._send({"sessions": [s.to_dict() for s in self._debugger().sessions()]})

    def _op_snapshot(self, request: dict[str, Any]) -> None:
        from monarch._src.admin.model import collect

        self._send({"snapshot": collect()})

    def _op_stacks(self, request: dict[str, Any]) -> None:
        from monarch._src.admin.model import find_proc
        from monarch._src.admin.stacks import dump_stacks

        address = find_proc(str(request["mesh"]), int(request["rank"]))
        dump = dump_stacks(address, py_spy=bool(request.get("py_spy", True)))
        self._send({"dump": dump.to_dict()})

    def _op_attach(self, request: dict[str, Any]) -> None:
        rank = request.get("rank")
        session = self._debugger().session(request.get("name"),
                                                 None if rank is None else int(rank))
        if not session.claim.acquire(timeout=1.0):
            self._send({"error": f"Another debugger is attached to {session.info.display}."})
            return
        try:
            self._send({"attached": session.info.to_dict()})
            session.reshow_prompt()
            while True:
                try:
                    item = session.read(timeout=5.0)
                except TimeoutError:  # the actor runs a command; a lost process ends it
                    continue
                if item is None:
                    self._send({"end": "continued"})
                    return
                text, waiting = item
                self._send({"out": text, "input": waiting})
                if waiting:
                    reply = self.rfile.readline()
                    if not reply:  # the terminal detached; the actor stays paused
                        return
                    session.send(str(json.loads(reply)["line"]))
        finally:
            session.claim.release()


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    controller: Any  # the DebugClient serving list/attach; None until a debugger starts
    url: str  # the admin HTTP API's base URL, token included (see http.py)
    token: str  # what every request must carry
    ssl_context: ssl.SSLContext | None  # mutual TLS, when it is on

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A handshake refused in `setup` (a peer without a certificate): logged, not printed.
        logger.warning("monarch: control connection from %s failed", client_address,
                       exc_info=True)


class _TCPServer6(_TCPServer):
    address_family = socket.AF_INET6


def _server_class(host: str) -> type[_TCPServer]:
    return _TCPServer6 if ":" in host else _TCPServer


class ControlServer:
    """The running server: its address and the file that publishes it. One per process."""

    def __init__(self, server: _TCPServer, host: str, path: str) -> None:
        self._server = server
        self.host = host
        self.port: int = server.server_address[1]
        self.path = path  # the published address file
        self.token = server.token
        self.url = server.url  # the admin HTTP API's base URL (token in its path)
        self._thread = threading.Thread(target=server.serve_forever, name="monarch-control-server",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def running(cls) -> ControlServer | None:
        """This process's server, if it serves."""
        return _running

    @classmethod
    def start(cls, controller: Any, host: str | None = None,
              port: int | None = None) -> ControlServer:
        """Listen (on the configured or default address unless given) and publish the address;
        the server already running in this process if there is one (it takes `controller` if it
        had none: the admin API may start before the debugger)."""
        global _running
        with _running_lock:
            if _running is not None:
                if controller is not None and _running._server.controller is None:
                    _running._server.controller = controller
                return _running
            env_host, env_port = server_address_from_env()
            host = host or env_host
            port = env_port if port is None else port
            server_class = _server_class(host)
            try:
                server = server_class((host, port), _Handler)
            except OSError as exc:
                if port == 0:
                    raise
                logger.warning("monarch: debug server port %s:%s is taken (%s); using a free port",
                               host, port, exc)
                server = server_class((host, 0), _Handler)
            from monarch._src.lowlevel import ssl_contexts, tls_enabled

            server.controller = controller
            server.token = secrets.token_hex(32)
            server.ssl_context = ssl_contexts()[0] if tls_enabled() else None
            scheme = "https" if server.ssl_context is not None else "http"
            shown = socket.gethostname() if host in ("", "::", "0.0.0.0") else host
            shown = f"[{shown}]" if ":" in shown else shown
            server.url = f"{scheme}://{shown}:{server.server_address[1]}/{server.token}"
            path = _publish(host, server.server_address[1], server.token,
                            server.ssl_context is not None, server.url)
            cs = cls(server, host, path)
            atexit.register(cs.close)
            _running = cs
            return cs

    def close(self) -> None:
        """Stop serving and remove the address file."""
        global _running
        with _running_lock:
            if _running is self:
                _running = None
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.path)
        except OSError:
            pass  # removed already (the user cleaned .monarch/): nothing is published
        try:
            os.rmdir(os.path.dirname(self.path))  # the folder goes with the last file in it
        except OSError:
            pass  # other controllers' files (or the user's) are still there


_running_lock = threading.Lock()
_running: ControlServer | None = None  # this process's server, while it serves


def sweep_dead(directory: str) -> None:
    """Remove the address files of controllers that died without removing theirs (a process
    killed, as a Jupyter kernel shut down with `now=True` is): the CLI skips them anyway."""
    from monarch._src.admin.client import _alive

    for path in glob.glob(os.path.join(directory, "controller-*.json")):
        pid = os.path.basename(path)[len("controller-"):-len(".json")]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        try:
            os.unlink(path)
        except OSError:
            pass  # swept by another controller first, or not this user's to remove


def _publish(host: str, port: int, token: str, tls: bool, url: str) -> str:
    """Write the server's address and token to `.monarch/controller-<pid>.json`, readable by
    this user only (created 0600, then renamed into place)."""
    directory = os.path.join(os.getcwd(), ".monarch")
    os.makedirs(directory, exist_ok=True)
    sweep_dead(directory)
    path = os.path.join(directory, f"controller-{os.getpid()}.json")
    tmp = path + ".tmp"
    try:
        os.unlink(tmp)  # left by a process of the same pid: it may have other permissions
    except FileNotFoundError:
        pass  # none left: the usual case
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"host": host, "port": port, "pid": os.getpid(), "token": token, "tls": tls,
                   "admin_url": url}, f)
    os.replace(tmp, path)
    return path
