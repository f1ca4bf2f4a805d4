"""The mounts' byte service: a token-guarded TCP server over one directory, and its client.

A mount moves file bytes on connections of its own rather than as actor messages: a FUSE read
arrives on one of libfuse's threads, outside any actor, and must be answered (or fail with EIO)
within a bounded time whatever the state of the actor runtime. Each request is one frame: a
4-byte length, a JSON header, then the payload bytes the header announces. The first frame of a
connection carries the token; a connection that does not know it is closed. Bytes travel in
clear: the token keeps other users of the network from asking, not from listening.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

from monarch._src.mount.layout import attrs_of

_LEN = struct.Struct(">I")
# The largest header accepted (a listing of a big directory fits).
_MAX_HEADER = 256 * 1024 * 1024
# How often the server writes to a watch connection, so its client can tell it is alive.
HEARTBEAT_S: float = 1.0


class SourceGone(OSError):
    """The mount's source is unreachable (its process died, or it did not answer in time)."""


def _send(sock: socket.socket, header: Mapping[str, Any],
          payload: bytes | memoryview = b"") -> None:
    head = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(_LEN.pack(len(head)) + head)
    if payload:
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the peer closed the connection")
        got += k
    return buf


def _recv(sock: socket.socket) -> dict[str, Any]:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if n > _MAX_HEADER:
        raise ConnectionError(f"a frame header of {n} bytes is too large")
    header = json.loads(bytes(_recv_exact(sock, n)))
    if not isinstance(header, dict):
        raise ConnectionError("a frame header is not a JSON object")
    return header


class FileServer:
    """Serves reads, stats and listings under `root` to clients that present `token`."""

    def __init__(self, root: str, token: str, host: str = "") -> None:
        self.root = os.path.realpath(root)
        self._token = token
        self._listener = socket.create_server((host, 0), backlog=128)
        self.port: int = self._listener.getsockname()[1]
        self._conns: set[socket.socket] = set()  # live client connections, closed by stop()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.bytes_sent = 0  # file bytes sent to all clients since start
        threading.Thread(target=self._accept, name="mount-fileserver", daemon=True).start()

    def stop(self) -> None:
        """Close the listener and every connection (clients' reads then fail at once)."""
        self._stopped.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # never connected: closing is enough
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the peer went first
            conn.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # stop() closed the listener
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopped.is_set():
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="mount-fileconn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            hello = _recv(conn)
            if not hmac.compare_digest(str(hello.get("token", "")), self._token):
                return
            _send(conn, {"ok": True})
            conn.settimeout(None)
            while True:
                request = _recv(conn)
                op = request.get("op")
                if op == "watch":
                    self._watch(conn)
                    return
                handler = _OPS.get(str(op))
                if handler is None:
                    _send(conn, {"error": "EINVAL", "why": f"unknown op {op!r}"})
                    continue
                try:
                    header, payload = handler(self, request)
                except OSError as exc:
                    _send(conn, {"error": _errno_name(exc), "why": str(exc)})
                    continue
                self.bytes_sent += len(payload)
                if "sizes" not in header:
                    header = {**header, "nbytes": len(payload)}
                _send(conn, header, payload)
        except (OSError, ValueError):
            return  # the client went away (or spoke garbage): drop the connection
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _watch(self, conn: socket.socket) -> None:
        while not self._stopped.wait(HEARTBEAT_S):
            _send(conn, {"alive": True})

    def resolve(self, rel: str) -> str:
        """The real path of `rel` under the root; PermissionError if it leaves the root."""
        path = os.path.normpath(os.path.join(self.root, rel.lstrip("/")))
        if path == self.root:
            return path
        parent = os.path.realpath(os.path.dirname(path))
        if parent != self.root and not parent.startswith(self.root + os.sep):
            raise PermissionError(13, f"{rel!r} is outside the served directory")
        return os.path.join(parent, os.path.basename(path))

    # -- operations ---------------------------------------------------------------------------

    def _op_read(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        return {"ok": True}, self._read_one(request["path"], int(request["offset"]),
                                            int(request["length"]), request.get("fence"))

    def _op_read_many(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        sizes: list[int] = []
        out = bytearray()
        for path, offset, length, fence in request["items"]:
            try:
                data = self._read_one(path, int(offset), int(length), fence)
            except OSError:
                sizes.append(-1)  # changed or gone since the index: the reader gets EIO
                continue
            sizes.append(len(data))
            out += data
        return {"sizes": sizes}, bytes(out)

    def _read_one(self, rel: str, offset: int, length: int, fence: Any) -> bytes:
        fd = os.open(self.resolve(rel), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            if fence is not None:
                st = os.fstat(fd)
                if [st.st_size, st.st_mtime_ns] != list(fence):
                    raise OSError(116, f"{rel} changed since it was indexed")  # ESTALE
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)

    def _op_stat(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        st = os.lstat(self.resolve(request["path"]))
        return {"attr": attrs_of(st), "mtime_ns": st.st_mtime_ns}, b""

    def _op_list(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        entries = []
        with os.scandir(self.resolve(request["path"])) as it:
            for entry in it:
                try:
                    entries.append([entry.name, attrs_of(entry.stat(follow_symlinks=False))])
                except OSError:
                    continue  # removed while listing
        return {"entries": entries}, b""

    def _op_readlink(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        return {"target": os.readlink(self.resolve(request["path"]))}, b""


_OPS: dict[str, Callable[[FileServer, dict[str, Any]], tuple[dict[str, Any], bytes]]] = {
    "read": FileServer._op_read,
    "read_many": FileServer._op_read_many,
    "stat": FileServer._op_stat,
    "list": FileServer._op_list,
    "readlink": FileServer._op_readlink,
}


def _errno_name(exc: OSError) -> str:
    import errno

    return errno.errorcode.get(exc.errno or 0, "EIO")


def _errno_of(name: str) -> int:
    import errno

    return int(getattr(errno, name, errno.EIO))


class FileClient:
    """Calls a `FileServer`: one connection per calling thread, each call bounded by `timeout`.

    Every failure is an OSError: the server's own errno (ENOENT, ESTALE, ...) or `SourceGone`
    (EIO) when the server cannot be reached or did not answer in time.
    """

    def __init__(self, host: str, port: int, token: str, timeout: float) -> None:
        self.address = (host, port)
        self._token = token
        self.timeout = timeout
        self._local = threading.local()
        self._all: set[socket.socket] = set()  # every open connection, for close()
        self._lock = threading.Lock()
        self._closed = False
        self.bytes_received = 0  # file bytes received on all connections

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _send(sock, {"token": self._token})
            if not _recv(sock).get("ok"):
                raise ConnectionError("the source refused the mount's token")
        except BaseException:
            sock.close()
            raise
        with self._lock:
            if self._closed:
                sock.close()
                raise ConnectionError("the mount's client is closed")
            self._all.add(sock)
        return sock

    def _drop(self, sock: socket.socket) -> None:
        self._local.sock = None
        with self._lock:
            self._all.discard(sock)
        sock.close()

    def call(self, request: Mapping[str, Any]) -> tuple[dict[str, Any], bytes]:
        """One request and its answer (header, payload)."""
        sock: socket.socket | None = getattr(self._local, "sock", None)
        try:
            if sock is None:
                sock = self._local.sock = self._connect()
            _send(sock, request)
            header = _recv(sock)
            size = int(header.get("nbytes", 0)) or sum(max(0, s) for s in header.get("sizes", ()))
            payload = bytes(_recv_exact(sock, size)) if size else b""
        except (OSError, ValueError) as exc:
            if sock is not None:
                self._drop(sock)
            raise SourceGone(5, f"the mount's source at {self.address[0]}:{self.address[1]} "
                                f"did not answer ({exc})") from exc
        if "error" in header:
            raise OSError(_errno_of(str(header["error"])), str(header.get("why", "")))
        self.bytes_received += len(payload)
        return header, payload

    def watch(self, on_gone: Callable[[], None], silence: float) -> None:
        """Call `on_gone` (once, on a thread of its own) when the server stops answering:
        its connection closes, or no heartbeat arrives for `silence` seconds."""
        sock = self._connect()
        sock.settimeout(silence)
        _send(sock, {"op": "watch"})

        def run() -> None:
            try:
                while True:
                    _recv(sock)
            except (OSError, ValueError):
                pass  # closed, reset or silent: the source is gone (or we closed it)
            finally:
                with self._lock:
                    closed = self._closed
                    self._all.discard(sock)
                sock.close()
                if not closed:
                    on_gone()

        threading.Thread(target=run, name="mount-watch", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._all)
            self._all.clear()
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer
            sock.close()
