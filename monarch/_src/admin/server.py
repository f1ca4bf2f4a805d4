"""The root client's control server: what `monarch debug`, `monarch stacks` and `monarch top`
talk to from another terminal.

A threaded TCP server on the `mesh_admin_addr` config key ('host:port'), else on
`MONARCH_DEBUG_SERVER_HOST` (default `localhost`) and `MONARCH_DEBUG_SERVER_PORT` (default 27000;
when that port is taken, any free one). Its address
is published in `.monarch/controller-<pid>.json` under the client's working directory (removed
at exit), which is how the CLI finds a client without flags. The protocol is JSON lines, one
request per connection:

* `{"op": "list"}` -> `{"sessions": [...]}` (paused actors)
* `{"op": "attach", "name": n, "rank": r}` -> a stream of `{"out": text, "input": bool}`; the
  client answers each `"input": true` with `{"line": command}`; ends with `{"end": reason}`
* `{"op": "stacks", "mesh": m, "rank": r}` -> `{"dump": {...}}`
* `{"op": "snapshot"}` -> `{"snapshot": {...}}` (see `model.collect`)

Any failure is answered `{"error": message}`. The server is plain stdlib (`socketserver`) on its
own threads, apart from the runtime loop, so a slow client never delays message routing. It
listens on loopback by default: anyone who can connect can drive a debugger, so binding another
interface is the user's explicit choice.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import socketserver
import threading
from typing import Any

__all__ = ["ControlServer", "DEFAULT_PORT", "server_address_from_env"]

logger = logging.getLogger(__name__)

DEFAULT_PORT = 27000
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
        super().setup()
        self.connection.settimeout(_READ_TIMEOUT)

    def _send(self, msg: dict[str, Any]) -> None:
        self.wfile.write((json.dumps(msg) + "\n").encode())
        self.wfile.flush()

    def handle(self) -> None:
        try:
            line = self.rfile.readline()
            if not line:
                return
            try:
                request = json.loads(line)
            except ValueError:
                self._send({"error": "A request is one JSON object per line."})
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
        except OSError as exc:  # the client went away
            logger.debug("monarch: control client dropped: %s", exc)

    def _op_list(self, request: dict[str, Any]) -> None:
        self._send({"sessions": [s.to_dict() for s in self.server.controller.sessions()]})

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
        session = self.server.controller.session(request.get("name"),
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
    controller: Any


class _TCPServer6(_TCPServer):
    address_family = socket.AF_INET6


def _server_class(host: str) -> type[_TCPServer]:
    return _TCPServer6 if ":" in host else _TCPServer


class ControlServer:
    """The running server: its address and the file that publishes it."""

    def __init__(self, server: _TCPServer, host: str, path: str) -> None:
        self._server = server
        self.host = host
        self.port: int = server.server_address[1]
        self.path = path  # the published address file
        self._thread = threading.Thread(target=server.serve_forever, name="monarch-control-server",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, controller: Any, host: str | None = None,
              port: int | None = None) -> ControlServer:
        """Listen (on the env's or default address unless given) and publish the address."""
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
        server.controller = controller
        path = _publish(host, server.server_address[1])
        cs = cls(server, host, path)
        atexit.register(cs.close)
        return cs

    def close(self) -> None:
        """Stop serving and remove the address file."""
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _publish(host: str, port: int) -> str:
    directory = os.path.join(os.getcwd(), ".monarch")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"controller-{os.getpid()}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"host": host, "port": port, "pid": os.getpid()}, f)
    os.replace(tmp, path)
    return path
