"""A read-only FUSE file system over an index (`layout.build_index`'s shape), and its session.

`TreeFS` serves the tree (lookups, listings, symlinks, attributes) from the index in memory and
asks a `Backend` for file bytes; the backends differ in where bytes come from (blocks delivered
into memory, a per-host chunk cache filled from the source, a remote host's files).
`FuseSession` runs libfuse's multithreaded loop (through mfusepy) on a thread of its own and
unmounts with `fusermount3`. Rejected: a FUSE protocol implementation of our own over
/dev/fuse, which would duplicate what libfuse3 (Debian's `fuse3`) does well.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from monarch._src.mount.layout import Index

logger = logging.getLogger(__name__)

# How long the kernel may cache an attribute or a name before asking again (seconds). Short,
# so a refreshed tree or a growing remote file shows within a fraction of a second.
ATTR_TTL_S: float = 0.2

_TIME_KEYS = ("st_atime", "st_mtime", "st_ctime")


def fuse_unavailable_reason() -> str | None:
    """Why FUSE mounts cannot work on this host, or None when they can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist on this host"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"/dev/fuse cannot be opened ({exc.strerror})"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian's fuse3 package)"
    try:
        _load_mfusepy()
    except (ImportError, OSError) as exc:
        return f"the mfusepy package cannot load libfuse3 ({exc})"
    return None


def fuse_error(what: str, reason: str) -> RuntimeError:
    """The error of `what` on a host where FUSE cannot work, naming the alternative."""
    return RuntimeError(
        f"{what} needs FUSE, but {reason}. Copy the directory to the hosts with "
        f"monarch.job.sync_workspace(host_mesh, DIR) (or `monarch exec --workspace DIR`) "
        f"instead.")


def require_fuse(what: str) -> None:
    """Raise `fuse_error` when this host cannot mount FUSE."""
    reason = fuse_unavailable_reason()
    if reason is not None:
        raise fuse_error(what, reason)


class Backend(Protocol):
    """Where a mount's file bytes come from."""

    def read(self, vpath: str, node: Mapping[str, Any], offset: int, size: int) -> bytes:
        """`size` bytes (fewer at the end of the file) at `offset`; OSError(EIO) if unavailable."""
        ...


def eio(why: str) -> OSError:
    return OSError(errno.EIO, why)


def _load_mfusepy() -> Any:
    import importlib

    return importlib.import_module("mfusepy")


class TreeFS:
    """mfusepy operations over an index; reads go to the backend, the tree never blocks."""

    use_ns = True  # times handed to libfuse are nanoseconds (mfusepy's non-deprecated form)

    def __init__(self, index: Index, backend: Backend) -> None:
        self._index = index  # replaced whole by `swap`; readers take one reference
        self.backend = backend
        self.ready = threading.Event()  # set by libfuse's init: the kernel talks to us

    @property
    def index(self) -> Index:
        return self._index

    def swap(self, index: Index) -> None:
        """Serve `index` from now on (open files keep their paths; reads see new bytes)."""
        self._index = index

    def _node(self, path: str) -> Mapping[str, Any]:
        node = self._index.get(path)
        if node is None:
            raise OSError(errno.ENOENT, path)
        return node

    # -- libfuse operations -------------------------------------------------------------------

    def init(self, path: str) -> None:
        self.ready.set()

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        node = self._node(path)
        attr = dict(node["attr"])
        for key in _TIME_KEYS:
            if key in attr:
                attr[key] = int(float(attr[key]) * 1e9)
        if "file_len" in node:
            attr["st_size"] = node["file_len"]
        elif "children" in node:
            attr["st_mode"] = stat.S_IFDIR | (int(attr.get("st_mode", 0o755)) & 0o7777)
        return attr

    def readdir(self, path: str, fh: Any) -> list[str]:
        node = self._node(path)
        if "children" not in node:
            raise OSError(errno.ENOTDIR, path)
        return [".", "..", *node["children"]]

    def readlink(self, path: str) -> str:
        target = self._node(path).get("link_target")
        if target is None:
            raise OSError(errno.EINVAL, path)
        return str(target)

    def open(self, path: str, flags: int) -> int:
        node = self._node(path)
        if "children" in node:
            raise OSError(errno.EISDIR, path)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise OSError(errno.EROFS, path)
        return 0

    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        node = self._node(path)
        length = int(node.get("file_len", 0))
        if offset >= length:
            return b""
        return self.backend.read(path, node, offset, min(size, length - offset))

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_namemax": 255}

    def access(self, path: str, amode: int) -> int:
        self._node(path)
        if amode & os.W_OK:
            raise OSError(errno.EROFS, path)
        return 0


class FuseSession:
    """One mounted file system: libfuse's loop on a daemon thread until `unmount()`."""

    def __init__(self, ops: Any, mountpoint: str, *, fsname: str,
                 on_exit: Callable[[bool], None] | None = None,
                 options: Mapping[str, Any] | None = None) -> None:
        """Mount `ops` at `mountpoint` (an existing absolute directory) and wait until it serves.

        `on_exit(requested)` runs on the loop's thread when the loop ends: `requested` is False
        when something else than `unmount()` ended it (a signal, an outside `fusermount -u`).
        """
        if not os.path.isabs(mountpoint):
            raise RuntimeError(f"The mount point must be an absolute path, got {mountpoint!r}.")
        if not os.path.isdir(mountpoint):
            raise RuntimeError(f"The mount point {mountpoint!r} is not an existing directory.")
        self.mountpoint = mountpoint
        self.ops = ops
        self._requested = False  # unmount() asked for the end of the loop
        self._error: BaseException | None = None  # why the loop ended before serving
        self._on_exit = on_exit
        mfusepy = _load_mfusepy()
        kwargs: dict[str, Any] = {
            "foreground": True, "ro": True, "fsname": fsname, "raw_fi": False,
            "attr_timeout": ATTR_TTL_S, "entry_timeout": ATTR_TTL_S,
            "negative_timeout": ATTR_TTL_S,
        }
        kwargs.update(options or {})

        def run() -> None:
            try:
                mfusepy.FUSE(ops, mountpoint, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - reported to the mounting thread
                self._error = exc
            finally:
                ops.ready.set()  # wakes a mounter waiting on a loop that never served
                if on_exit is not None:
                    on_exit(self._requested)

        self._thread = threading.Thread(target=run, name=f"fuse:{mountpoint}", daemon=True)
        self._thread.start()
        ops.ready.wait()
        if not self._thread.is_alive() or self._error is not None:
            self._thread.join(timeout=5)
            raise RuntimeError(f"Mounting FUSE at {mountpoint!r} failed: "
                               f"{self._error or 'libfuse exited at once'}.")

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def unmount(self, *, lazy_if_busy: bool = True, timeout: float = 30.0) -> tuple[str, str]:
        """Unmount; returns ("ok" | "not_mounted" | "busy" | "error", detail)."""
        if not self._thread.is_alive():
            return "not_mounted", ""
        self._requested = True
        status, detail = fusermount_unmount(self.mountpoint, lazy_if_busy=lazy_if_busy)
        if status == "ok":
            self._thread.join(timeout=timeout)
        else:
            self._requested = False
        return status, detail


def is_mounted(path: str) -> bool:
    """Whether `path` is a mount point in this mount namespace (a dead FUSE mount included)."""
    target = os.path.abspath(path)
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 1 and _unescape(fields[1]) == target:
                    return True
    except OSError:
        return os.path.ismount(target)
    return False


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def fusermount_unmount(mountpoint: str, *, lazy_if_busy: bool) -> tuple[str, str]:
    """`fusermount3 -u`, then `-z` if busy and allowed: (status, detail)."""
    if not is_mounted(mountpoint):
        return "not_mounted", ""
    done = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True,
                          timeout=60)
    if done.returncode == 0:
        return "ok", ""
    detail = done.stderr.strip()
    if "busy" in detail.lower():
        if lazy_if_busy:
            lazy = subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True,
                                  text=True, timeout=60)
            if lazy.returncode == 0:
                return "ok", ""
        return "busy", detail
    return "error", detail
