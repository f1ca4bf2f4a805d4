"""Talking to a root client's control server from another process (the `monarch` CLI).

Which client: `--host`/`--port` when given; else `MONARCH_DEBUG_SERVER_HOST`/`_PORT` when set;
else the newest `.monarch/controller-<pid>.json` in the working directory whose process is still
alive; else `localhost:27000`. Every request carries the server's token, read from the published
file of the server on that port (or `MONARCH_CONTROL_TOKEN`, for a client whose file this user
cannot read here), and goes over TLS when that file says the server speaks it. Stdlib only (and
monarch's configuration, for the TLS files): the CLI does not start a monarch runtime.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any, NamedTuple

__all__ = ["TOKEN_ENV", "ControlConnection", "Server", "add_target_arguments", "admin_get",
           "admin_url_of", "find_server", "request", "target_of"]

_CONNECT_TIMEOUT = 5.0
TOKEN_ENV = "MONARCH_CONTROL_TOKEN"


class Server(NamedTuple):
    """A control server to talk to: where it listens, its token, whether it speaks TLS."""

    host: str
    port: int
    token: str = ""
    tls: bool = False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_server(host: str | None = None, port: int | None = None,
                directory: str | None = None) -> Server:
    """The control server to talk to (see the module docstring)."""
    from monarch._src.admin.server import DEFAULT_PORT

    published = _published(directory or os.getcwd())
    env_host = os.environ.get("MONARCH_DEBUG_SERVER_HOST")
    env_port = os.environ.get("MONARCH_DEBUG_SERVER_PORT")
    if host is None and port is None and env_port not in (None, "", "0"):
        host, port = env_host, int(str(env_port))
    if host is None and port is None:
        if published:
            return published[0]
        port = DEFAULT_PORT
    port = DEFAULT_PORT if port is None else port
    # The published file of the server on that port holds its token (host names vary).
    found = next((s for s in published if s.port == port), None)
    token = os.environ.get(TOKEN_ENV) or (found.token if found is not None else "")
    return Server(host or env_host or "localhost", port, token,
                  found.tls if found is not None else False)


def _published(directory: str) -> list[Server]:
    """The servers published under `directory/.monarch` by live processes, newest first."""
    found: list[tuple[float, Server]] = []
    for path in glob.glob(os.path.join(directory, ".monarch", "controller-*.json")):
        try:
            with open(path) as f:
                info = json.load(f)
            mtime = os.path.getmtime(path)
            server = Server(str(info["host"]), int(info["port"]), str(info.get("token", "")),
                            bool(info.get("tls", False)))
            alive = _alive(int(info["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not readable by this user, or not a server's file
        if alive:
            found.append((mtime, server))
    return [server for _, server in sorted(found, key=lambda item: -item[0])]


class ControlConnection:
    """One request to the control server and the JSON lines that answer it."""

    def __init__(self, server: Server, msg: dict[str, Any], timeout: float = 60.0) -> None:
        self._server = server
        self._answered = False
        try:
            sock = socket.create_connection((server.host, server.port),
                                            timeout=_CONNECT_TIMEOUT)
        except OSError as exc:
            raise ConnectionError(
                f"No monarch client is serving debug/admin requests at {server.host}:"
                f"{server.port} ({exc}). Start your program (a breakpoint() or "
                "debug_controller() starts the server), or pass --host/--port."
            ) from exc
        if server.tls:
            from monarch._src.lowlevel import ssl_contexts

            try:
                sock = ssl_contexts()[1].wrap_socket(sock)
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        self._sock.settimeout(timeout)
        self._file = self._sock.makefile("rwb")
        self.send({**msg, "token": server.token})

    def send(self, msg: dict[str, Any]) -> None:
        """Send one JSON message."""
        self._file.write((json.dumps(msg) + "\n").encode())
        self._file.flush()

    def receive(self) -> dict[str, Any]:
        """The next message; raises `ConnectionError` if the server closed the connection."""
        line = self._file.readline()
        if not line and not self._answered:
            where = f"{self._server.host}:{self._server.port}"
            raise ConnectionError(
                f"The monarch client at {where} closed the connection without answering: it "
                "answers only requests that carry its token. Run this command in the client's "
                "working directory (its token is in .monarch/controller-<pid>.json there, "
                f"readable by its user only) or set {TOKEN_ENV} to that token."
                if not self._server.token else
                f"The monarch client at {where} closed the connection without answering: the "
                "token is not the one it expects (is another client serving on that port?)."
            )
        if not line:
            raise ConnectionError("The monarch client closed the connection.")
        self._answered = True
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


def request(server: Server, msg: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Send one request and return its single answer."""
    with ControlConnection(server, msg, timeout) as conn:
        return conn.receive()


def admin_url_of(server: Server) -> str:
    """The mesh admin HTTP API's base URL (token included) of the server."""
    host = f"[{server.host}]" if ":" in server.host else server.host
    return f"{'https' if server.tls else 'http'}://{host}:{server.port}/{server.token}"


def admin_get(target: Server | str, path: str, timeout: float = 60.0) -> Any:
    """GET `path` (e.g. "/v1/snapshot") from the admin HTTP API of `target` (a server, or an
    admin URL such as `job.state().admin_url`); the decoded JSON, or the text of a text route.
    Raises `ConnectionError` when nothing answers or the token is refused, `RuntimeError` with
    the server's message for any other error answer."""
    base = target if isinstance(target, str) else admin_url_of(target)
    url = base.rstrip("/") + path
    handlers: list[Any] = [urllib.request.ProxyHandler({})]
    if url.startswith("https:"):
        from monarch._src.lowlevel import ssl_contexts

        handlers.append(urllib.request.HTTPSHandler(context=ssl_contexts()[1]))
    opener = urllib.request.build_opener(*handlers)
    where = urllib.parse.urlsplit(url).netloc
    try:
        with opener.open(url, timeout=timeout) as resp:
            body = resp.read()
            ctype = resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        with exc:
            message = exc.read().decode(errors="replace")
        try:
            message = json.loads(message)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            pass  # not our error envelope: show the body as it came
        if exc.code == 401:
            has_token = bool(target.token) if isinstance(target, Server) else \
                bool(urllib.parse.urlsplit(base).path.strip("/"))
            raise ConnectionError(
                f"The monarch client at {where} refused the request: the token is not the one "
                "it expects (is another client serving on that port?)."
                if has_token else
                f"The monarch client at {where} answers only requests that carry its token. "
                "Run this command in the client's working directory (its token is in "
                ".monarch/controller-<pid>.json there, readable by its user only), pass --url "
                f"with its admin URL, or set {TOKEN_ENV} to that token.") from None
        raise RuntimeError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectionError(
            f"No monarch client is serving the admin API at {where} ({exc}). Start your "
            "program (job.enable_admin(), a breakpoint() or debug_controller() starts it), or "
            "pass --url or --host/--port.") from exc
    return json.loads(body) if ctype.startswith("application/json") else body.decode()


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """`--url`, `--host`, `--port`: which client's admin API to read (`monarch top`, `stacks`,
    `why`)."""
    p.add_argument("--url", default=None,
                   help="the client's admin URL (job.state().admin_url), token included")
    p.add_argument("--host", default=None, help="the client's control server host")
    p.add_argument("--port", type=int, default=None, help="the client's control server port")


def target_of(args: argparse.Namespace) -> Server | str:
    """The admin API to read: `--url` as given, else the client found from the flags."""
    if args.url:
        return str(args.url)
    return find_server(args.host, args.port)
