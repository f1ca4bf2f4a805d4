"""Gather mount: every host's directory of a mesh, read-only, under one local directory.

Each host runs a `GatherSource` (one proc per host) serving its directory on a `wire.FileServer`;
the controller mounts a FUSE file system whose first level names the hosts by mesh point
(`hosts_0`, `hosts_1`, ...; a mesh without dimensions is mounted directly). Nothing is cached
here beyond the kernel's fraction of a second: every stat and read asks the host, so a file a
host is still writing (a log under `tail -f`) shows its new bytes at once. A host that is gone
fails its reads with EIO within `timeout` seconds; the others keep serving.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import secrets
import stat
import threading
import time
from typing import Any

from monarch._src.lowlevel import routable_ip
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mount import reaper
from monarch._src.mount.fs import FuseSession, eio, require_fuse
from monarch._src.mount.layout import point_key, prepare_mount_point
from monarch._src.mount.remote import resolve_subdir
from monarch._src.mount.wire import FileClient, FileServer, SourceGone

logger = logging.getLogger(__name__)

# How long a stat or read on a host may take before it fails with EIO (seconds).
DEFAULT_TIMEOUT_S: float = 10.0
# torchmonarch's name for how quickly a change on a host shows through the mount (seconds).
NOTIFY_BATCH_S: float = 0.05


class GatherSource(Actor):
    """A host's side of a gather mount: serves `remote_mount_point` (`$SUBDIR` resolved)."""

    def __init__(self) -> None:
        self._server: FileServer | None = None  # None until serve(), again after stop()

    @endpoint
    def serve(self, remote_mount_point: str) -> tuple[str, str, int, str]:
        """Start serving; returns (this host's key, address, port, token)."""
        key = point_key(dict(_rank()))
        root = resolve_subdir(remote_mount_point)
        token = secrets.token_hex(16)
        self._server = FileServer(root, token)
        return key, routable_ip(), self._server.port, token

    @endpoint
    def shutdown(self) -> None:
        """Stop serving (the proc's stop does it too)."""
        if self._server is not None:
            self._server.stop()
            self._server = None


def _rank() -> Any:
    from monarch._src.mesh.context import context

    return context().actor_instance.rank


def _dir_attr() -> dict[str, Any]:
    now = time.time_ns()
    return {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2, "st_size": 0, "st_atime": now,
            "st_mtime": now, "st_ctime": now, "st_uid": os.getuid(), "st_gid": os.getgid()}


class GatherFS:
    """mfusepy operations: the hosts' directories, asked live."""

    use_ns = True

    def __init__(self, clients: dict[str, FileClient]) -> None:
        self._clients = clients  # host key -> its server's client; "" alone: a 0-dim mesh
        self.ready = threading.Event()  # set by libfuse's init

    def _split(self, path: str) -> tuple[FileClient | None, str]:
        rel = path.lstrip("/")
        if "" in self._clients:
            return self._clients[""], rel
        if not rel:
            return None, ""
        head, _, rest = rel.partition("/")
        client = self._clients.get(head)
        if client is None:
            raise OSError(errno.ENOENT, path)
        return client, rest

    @staticmethod
    def _ask(client: FileClient, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        try:
            return client.call(request)
        except SourceGone as exc:
            raise eio(str(exc)) from exc

    def init(self, path: str) -> None:
        self.ready.set()

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        client, rel = self._split(path)
        if client is None:
            return _dir_attr()
        header, _ = self._ask(client, {"op": "stat", "path": rel})
        attr = dict(header["attr"])
        attr["st_mtime"] = int(header["mtime_ns"])
        for key in ("st_atime", "st_ctime"):
            attr[key] = int(float(attr[key]) * 1e9)
        attr["st_atime"] = attr["st_mtime"]
        attr["st_mode"] = int(attr["st_mode"]) & ~0o222  # read-only here
        return attr

    def readdir(self, path: str, fh: Any) -> list[str]:
        client, rel = self._split(path)
        if client is None:
            return [".", "..", *sorted(self._clients)]
        header, _ = self._ask(client, {"op": "list", "path": rel})
        return [".", "..", *sorted(name for name, _attr in header["entries"])]

    def readlink(self, path: str) -> str:
        client, rel = self._split(path)
        if client is None:
            raise OSError(errno.EINVAL, path)
        header, _ = self._ask(client, {"op": "readlink", "path": rel})
        return str(header["target"])

    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise OSError(errno.EROFS, path)
        client, _ = self._split(path)
        if client is None:
            raise OSError(errno.EISDIR, path)
        return 0

    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        client, rel = self._split(path)
        if client is None:
            raise OSError(errno.EISDIR, path)
        _, payload = self._ask(client, {"op": "read", "path": rel, "offset": offset,
                                        "length": size})
        return payload

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_namemax": 255}


class GatherMount:
    """A live gather mount (what `gather_mount` returns); a context manager that closes it."""

    def __init__(self, host_mesh: Any, remote_mount_point: str, local_mount_point: str, *,
                 timeout: float = DEFAULT_TIMEOUT_S) -> None:
        require_fuse("gather_mount")
        self.local_mount_point = os.path.abspath(local_mount_point)
        self.remote_mount_point = remote_mount_point
        self._mounted = False
        self._procs = host_mesh.spawn_procs(name="gather_mount")
        self._clients: dict[str, FileClient] = {}
        try:
            self._sources = self._procs.spawn("gather_mount", GatherSource)
            for _, (key, host, port, token) in self._sources.serve.call(
                    remote_mount_point).get().items():
                self._clients[key] = FileClient(host, port, token, timeout)
            prepare_mount_point(self.local_mount_point)
            self._session = FuseSession(
                GatherFS(self._clients), self.local_mount_point, fsname="monarch-gather",
                options={"attr_timeout": 0, "entry_timeout": 0, "negative_timeout": 0})
        except BaseException:
            self._stop_sources()
            raise
        self._reaper = reaper.start(self.local_mount_point)
        self._mounted = True
        atexit.register(self.close)

    def close(self) -> None:
        """Unmount (lazily if a file is still open there) and stop the hosts' servers."""
        if not self._mounted:
            return
        self._mounted = False
        status, detail = self._session.unmount(lazy_if_busy=True)
        if status not in ("ok", "not_mounted"):
            logger.warning("gather_mount: unmounting %s: %s %s", self.local_mount_point,
                           status, detail)
        proc = self._reaper
        if proc.stdin is not None:
            proc.stdin.write(b"done")
            proc.stdin.close()
        proc.wait(timeout=30)
        self._stop_sources()

    def _stop_sources(self) -> None:
        for client in self._clients.values():
            client.close()
        try:
            self._procs.stop().get()
        except Exception as exc:  # noqa: BLE001 - a dead host must not fail the close
            logger.warning("gather_mount: stopping its procs failed: %s", exc)

    def __enter__(self) -> GatherMount:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def gather_mount(host_mesh: Any, remote_mount_point: str, local_mount_point: str,
                 **kwargs: Any) -> GatherMount:
    """Mount each host's `remote_mount_point` (`$SUBDIR`: the host's key, e.g. `hosts_0`)
    read-only under `local_mount_point/<key>` (directly at `local_mount_point` for a mesh
    without dimensions). Mounted on return; `close()` or a `with` block unmounts. Keyword:
    `timeout` (seconds before a host that does not answer fails a read with EIO)."""
    unknown = sorted(set(kwargs) - {"timeout"})
    if unknown:
        raise TypeError(f"gather_mount got unknown keywords {unknown}; it takes timeout.")
    return GatherMount(host_mesh, remote_mount_point, local_mount_point, **kwargs)
