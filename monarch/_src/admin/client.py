"""Talking to a root client's control server from another process (the `monarch` CLI).

Which client: `--host`/`--port` when given; else `MONARCH_DEBUG_SERVER_HOST`/`_PORT` when set;
else the newest `.monarch/controller-<pid>.json` in the working directory whose process is still
alive; else `localhost:27000`. Stdlib only: the CLI does not start a monarch runtime.
"""

from __future__ import annotations

import glob
import json
import os
import socket
from typing import Any, Iterator

__all__ = ["ControlConnection", "find_server", "request"]

_CONNECT_TIMEOUT = 5.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_server(host: str | None = None, port: int | None = None,
                directory: str | None = None) -> tuple[str, int]:
    """The (host, port) of the control server to talk to (see the module docstring)."""
    from monarch._src.admin.server import DEFAULT_PORT

    if host is not None or port is not None:
        return host or "localhost", port if port is not None else DEFAULT_PORT
    env_host = os.environ.get("MONARCH_DEBUG_SERVER_HOST")
    env_port = os.environ.get("MONARCH_DEBUG_SERVER_PORT")
    if env_port is not None and env_port not in ("", "0"):
        return env_host or "localhost", int(env_port)
    pattern = os.path.join(directory or os.getcwd(), ".monarch", "controller-*.json")
    best: tuple[float, str, int] | None = None
    for path in glob.glob(pattern):
        try:
            with open(path) as f:
                info = json.load(f)
            mtime = os.path.getmtime(path)
        except (OSError, ValueError):
            continue
        if _alive(int(info["pid"])) and (best is None or mtime > best[0]):
            best = (mtime, str(info["host"]), int(info["port"]))
    if best is not None:
        return best[1], best[2]
    return env_host or "localhost", DEFAULT_PORT


class ControlConnection:
    """One request to the control server and the JSON lines that answer it."""

    def __init__(self, address: tuple[str, int], msg: dict[str, Any],
                 timeout: float = 60.0) -> None:
        try:
            self._sock = socket.create_connection(address, timeout=_CONNECT_TIMEOUT)
        except OSError as exc:
            raise ConnectionError(
                f"No monarch client is serving debug/admin requests at {address[0]}:{address[1]} "
                f"({exc}). Start your program (a breakpoint() or debug_controller() starts the "
                "server), or pass --host/--port."
            ) from exc
        self._sock.settimeout(timeout)
        self._file = self._sock.makefile("rwb")
        self.send(msg)

    def send(self, msg: dict[str, Any]) -> None:
        """Send one JSON message."""
        self._file.write((json.dumps(msg) + "\n").encode())
        self._file.flush()

    def receive(self) -> dict[str, Any]:
        """The next message; raises `ConnectionError` if the server closed the connection."""
        line = self._file.readline()
        if not line:
            raise ConnectionError("The monarch client closed the connection.")
        msg: dict[str, Any] = json.loads(line)
        if "error" in msg:
            raise RuntimeError(msg["error"])
        return msg

    def messages(self) -> Iterator[dict[str, Any]]:
        """Messages until the server closes the connection."""
        while True:
            try:
                yield self.receive()
            except ConnectionError:
                return

    def close(self) -> None:
        """Close the connection."""
        try:
            self._file.close()
        finally:
            self._sock.close()

    def __enter__(self) -> ControlConnection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def request(address: tuple[str, int], msg: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Send one request and return its single answer."""
    with ControlConnection(address, msg, timeout) as conn:
        return conn.receive()
