"""Remote mount: a directory of the controller, read-only on every host of a mesh, via FUSE.

`RemoteMount.open()` indexes the source (`layout.build_index`), serves its bytes on a
`wire.FileServer`, spawns one proc per host running a `RemoteMountWorker`, and ships the index
to each: the whole tree is visible at once, and file bytes come on demand, a chunk at a time
(`cache.CHUNK_SIZE`; a small file brings its small siblings along), into the host's chunk cache,
where the next mount finds them. Reads never wait unboundedly: a fetch that the source does not
answer within `fetch_timeout` fails with EIO, and when the source's process dies (its heartbeat
connection closes or falls silent) the workers fail every read at once and detach their mounts.
A worker's proc that dies leaves no dead mount behind: its `reaper` detaches it.

The alternative, torchmonarch's pipelined chain broadcast of 64 MiB pack blocks, suits
hundreds of hosts behind one slow link; here every host fetches what it reads straight from the
source, and the per-host cache makes a remount incremental.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from monarch._src.lowlevel import routable_ip
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import context
from monarch._src.mount import reaper
from monarch._src.mount.cache import CHUNK_SIZE, ChunkCache, chunk_key, default_cache_dir
from monarch._src.mount.fs import (
    ATTR_TTL_S,
    FuseSession,
    TreeFS,
    eio,
    is_mounted,
    require_fuse,
)
from monarch._src.mount.layout import (
    BIG_FILE_THRESHOLD,
    Index,
    build_index,
    point_key,
    prepare_mount_point,
)
from monarch._src.mount.wire import FileClient, FileServer

logger = logging.getLogger(__name__)

# How long one fetch may take before the read fails with EIO (seconds).
DEFAULT_FETCH_TIMEOUT_S: float = 30.0
# How long the source's heartbeat may be silent before the workers call it dead (seconds).
SILENCE_S: float = 10.0
# The most bytes one fetch brings (the faulted chunk plus small siblings of its file).
BATCH_BYTES: int = 16 * 1024 * 1024


def resolve_subdir(path: str) -> str:
    """`path` with `$SUBDIR` replaced by this actor's mesh point ("hosts_1"; "" for one host)."""
    if "$SUBDIR" not in path:
        return path
    return path.replace("$SUBDIR", point_key(dict(context().actor_instance.rank)))


class SourceBackend:
    """File bytes from the host's chunk cache, fetched from the source when missing."""

    def __init__(self, client: FileClient, cache: ChunkCache, source_id: str,
                 fs: TreeFS | None = None) -> None:
        self.client = client
        self.cache = cache
        self.source_id = source_id
        self.fs = fs  # set once the TreeFS exists: the tree, for sibling lookups
        self.gone = threading.Event()  # the source is dead: every fetch fails at once
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}  # chunk key -> set when fetched
        self.fetched_bytes = 0  # bytes received from the source
        self.fetches = 0  # round trips to the source
        self.hit_chunks = 0  # chunk reads served from the cache without a fetch

    def read(self, vpath: str, node: Mapping[str, Any], offset: int, size: int) -> bytes:
        out = bytearray()
        pos, stop = offset, offset + size
        while pos < stop:
            chunk = pos // CHUNK_SIZE
            lo = pos - chunk * CHUNK_SIZE
            n = min(stop - pos, CHUNK_SIZE - lo)
            out += self._chunk_slice(vpath, node, chunk, lo, n)
            pos += n
        return bytes(out)

    def _chunk_slice(self, vpath: str, node: Mapping[str, Any], chunk: int, lo: int,
                     n: int) -> bytes:
        key = chunk_key(self.source_id, vpath, node, chunk)
        data = self.cache.read(key, lo, n)
        if data is not None:
            self.hit_chunks += 1
            return data
        fetched = self._fetch(vpath, node, chunk, key)
        return fetched[lo:lo + n]

    def _fetch(self, vpath: str, node: Mapping[str, Any], chunk: int, key: str) -> bytes:
        if self.gone.is_set():
            raise eio(f"the source of {vpath} is gone")
        with self._lock:
            waiting = self._inflight.get(key)
            if waiting is None:
                mine = self._inflight[key] = threading.Event()
        if waiting is not None:
            if not waiting.wait(self.client.timeout) or self.gone.is_set():
                raise eio(f"fetching {vpath} did not finish in time")
            data = self.cache.read(key, 0, CHUNK_SIZE)
            if data is None:
                raise eio(f"fetching {vpath} failed")
            return data
        try:
            return self._fetch_batch(vpath, node, chunk, key)
        finally:
            with self._lock:
                del self._inflight[key]
            mine.set()

    def _fetch_batch(self, vpath: str, node: Mapping[str, Any], chunk: int, key: str) -> bytes:
        items = [(vpath, node, chunk, key), *self._siblings(vpath, node)]
        request = [[v, c * CHUNK_SIZE, min(CHUNK_SIZE, int(nd["file_len"]) - c * CHUNK_SIZE),
                    [nd["file_len"], nd["mtime_ns"]]] for v, nd, c, _ in items]
        try:
            header, payload = self.client.call({"op": "read_many", "items": request})
        except OSError as exc:
            raise eio(f"fetching {vpath}: {exc.strerror or exc}") from exc
        self.fetches += 1
        self.fetched_bytes += len(payload)
        mine = b""
        pos = 0
        for (v, _nd, _c, k), size in zip(items, header["sizes"], strict=True):
            if size < 0:
                if k == key:
                    raise eio(f"{v} changed at the source since it was mounted; refresh the "
                              f"mount")
                continue
            data = payload[pos:pos + size]
            pos += size
            self.cache.put(k, data)
            if k == key:
                mine = data
        return mine

    def _siblings(self, vpath: str, node: Mapping[str, Any]) -> list[tuple[str, Any, int, str]]:
        """Small uncached files of the same directory, brought along with a small file: an
        import reads a package's modules together."""
        if self.fs is None or int(node["file_len"]) >= BIG_FILE_THRESHOLD:
            return []
        index = self.fs.index
        parent = vpath.rsplit("/", 1)[0] or "/"
        budget = BATCH_BYTES - int(node["file_len"])
        out = []
        for name in index.get(parent, {}).get("children", ()):
            other = f"{parent.rstrip('/')}/{name}"
            nd = index.get(other)
            if other == vpath or nd is None or "file_len" not in nd:
                continue
            size = int(nd["file_len"])
            if size == 0 or size >= BIG_FILE_THRESHOLD or size > budget:
                continue
            k = chunk_key(self.source_id, other, nd, 0)
            if self.cache.has(k):
                continue
            out.append((other, nd, 0, k))
            budget -= size
        return out


class RemoteMountWorker(Actor):
    """A host's side of a remote mount: the FUSE session, its source client and its reaper."""

    def __init__(self) -> None:
        self._session: FuseSession | None = None  # None until mount(), again after unmount()
        self._fs: TreeFS | None = None
        self._backend: SourceBackend | None = None
        self._reaper: Any = None  # the watchdog process of the current mount
        self._mountpoint: str | None = None
        self._claim: _Claim | None = None  # held while this proc serves the machine's mount

    @endpoint
    def mount(self, mntpoint: str, index: Index, host: str, port: int, token: str,
              source_id: str, cache_dir: str | None, fetch_timeout: float) -> str:
        """Mount `index` at `mntpoint` (`$SUBDIR` resolved); returns the path mounted."""
        require_fuse("remote_mount")
        if self._session is not None and self._session.alive:
            raise RuntimeError(f"This host already serves a remote mount at "
                               f"{self._mountpoint!r}; close it first.")
        path = os.path.abspath(resolve_subdir(mntpoint))
        claim = _Claim(path, token)
        if not claim.take():
            # Another host of this mount on the same machine serves this path already.
            self._claim, self._mountpoint = None, path
            return path
        self._claim = claim
        try:
            prepare_mount_point(path)
            self._mount(path, index, host, port, token, source_id, cache_dir, fetch_timeout)
        except BaseException:
            claim.release()
            self._claim = None
            raise
        return path

    def _mount(self, path: str, index: Index, host: str, port: int, token: str,
               source_id: str, cache_dir: str | None, fetch_timeout: float) -> None:
        client = FileClient(host, port, token, fetch_timeout)
        backend = SourceBackend(client, ChunkCache(cache_dir or default_cache_dir()), source_id)
        fs = TreeFS(index, backend)
        backend.fs = fs
        self._session = FuseSession(fs, path, fsname="monarch-remotemount",
                                    on_exit=self._loop_ended)
        self._fs, self._backend, self._mountpoint = fs, backend, path
        self._reaper = reaper.start(path)
        client.watch(self._source_gone, SILENCE_S)

    def _loop_ended(self, requested: bool) -> None:
        """The FUSE loop ended. Unasked (a signal, an outside unmount): this proc has no
        purpose left, and a SIGTERM that libfuse consumed must still stop it."""
        if requested:
            return
        self._release_reaper()
        os.kill(os.getpid(), signal.SIGTERM)

    def _source_gone(self) -> None:
        """The source died: fail reads at once and detach the mount (open files see EIO)."""
        backend, session = self._backend, self._session
        if backend is None or session is None:
            return
        backend.gone.set()
        logger.warning("remote mount %s: its source is gone; unmounting.", self._mountpoint)
        session.unmount(lazy_if_busy=True, timeout=0)
        self._release_reaper()
        if self._claim is not None:
            self._claim.release()

    def _release_reaper(self) -> None:
        proc, self._reaper = self._reaper, None
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.write(b"done")
                proc.stdin.close()
            except OSError:
                pass  # the reaper is gone already: nothing to release
            proc.wait(timeout=30)

    @endpoint
    def refresh(self, index: Index) -> None:
        """Serve a new tree; returns once the kernel's cached attributes have expired."""
        if self._fs is None:
            raise RuntimeError("This host has no remote mount to refresh; open it first.")
        self._fs.swap(index)
        time.sleep(ATTR_TTL_S * 3)

    @endpoint
    def unmount(self) -> tuple[str, str]:
        """Unmount: ("ok" | "not_mounted" | "busy" | "error", detail); a busy mount is
        detached lazily. A host sharing its machine's mount leaves it to the one serving it."""
        session = self._session
        if session is None:
            return ("ok" if self._mountpoint is not None else "not_mounted"), ""
        status, detail = session.unmount(lazy_if_busy=True)
        if status in ("ok", "not_mounted"):
            if self._backend is not None:
                self._backend.client.close()
            self._release_reaper()
            self._session = None
            if self._claim is not None:
                self._claim.release()
                self._claim = None
        return status, detail

    @endpoint
    def stats(self) -> dict[str, int]:
        """Bytes and round trips fetched from the source, chunk reads served by the cache."""
        b = self._backend
        if b is None:
            return {"fetched_bytes": 0, "fetches": 0, "hit_chunks": 0}
        return {"fetched_bytes": b.fetched_bytes, "fetches": b.fetches,
                "hit_chunks": b.hit_chunks}


class _Claim:
    """Which proc of a machine serves the mount at a path: several hosts of one mesh can share
    a machine (a ProcessJob's), and one FUSE mount per path serves them all. The claim is a
    file naming the mount's token, created exclusively; a claim left by a mount that is gone
    (nothing mounted at the path) is taken over."""

    DIR = os.path.join(tempfile.gettempdir(), "monarch-mount-claims")

    def __init__(self, path: str, token: str) -> None:
        self.path = path
        self.token = token
        digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()
        self.file = os.path.join(self.DIR, digest)

    def take(self) -> bool:
        """True: this proc mounts. False: a sibling of the same mount serves the path."""
        os.makedirs(self.DIR, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                try:
                    with open(self.file) as f:
                        holder = f.read().strip()
                except FileNotFoundError:
                    continue  # released meanwhile: try again
                if holder == self.token:
                    return False
                if is_mounted(self.path):
                    raise RuntimeError(f"{self.path!r} is already the mount point of another "
                                       f"remote mount on this machine; close it or choose "
                                       f"another mntpoint.") from None
                os.unlink(self.file)  # its mount is gone
                continue
            with os.fdopen(fd, "w") as f:
                f.write(self.token)
            return True
        raise RuntimeError(f"Could not claim the mount point {self.path!r}; retry.")

    def release(self) -> None:
        try:
            with open(self.file) as f:
                mine = f.read().strip() == self.token
            if mine:
                os.unlink(self.file)
        except FileNotFoundError:
            pass  # released already


def _shipped(index: Index) -> Index:
    """The index as workers need it: without the controller's own paths."""
    return {v: {k: x for k, x in node.items() if k != "full_path"} for v, node in index.items()}


class RemoteMount:
    """A source directory mounted on every host of a host mesh (`remotemount` returns one).

    `open()` mounts, `refresh()` swaps in the source's current tree without unmounting,
    `close()` unmounts and stops the mount's procs. The source is served from this process:
    when it exits, the hosts' mounts go with it.
    """

    def __init__(self, host_mesh: Any, sourcepath: str, mntpoint: str | None = None, *,
                 cache_dir: str | None = None,
                 fetch_timeout: float = DEFAULT_FETCH_TIMEOUT_S) -> None:
        self.sourcepath = os.path.abspath(sourcepath)
        if not os.path.isdir(self.sourcepath):
            raise ValueError(f"remote_mount: the source {sourcepath!r} is not a directory.")
        # `$SUBDIR` stays for the workers to resolve; otherwise an absolute path.
        self.mntpoint = mntpoint if mntpoint is not None and "$SUBDIR" in mntpoint else (
            os.path.abspath(mntpoint) if mntpoint is not None else self.sourcepath)
        if fetch_timeout <= 0:
            raise ValueError(f"remote_mount: fetch_timeout must be positive, got "
                             f"{fetch_timeout!r}.")
        self.host_mesh = host_mesh
        self.cache_dir = cache_dir
        self.fetch_timeout = float(fetch_timeout)
        self.index: Index | None = None  # the tree the workers serve; None when closed
        self.mounted_at: list[str] = []  # the path mounted on each host (rank order)
        self._server: FileServer | None = None
        self._procs: Any = None
        self._workers: Any = None

    @property
    def is_open(self) -> bool:
        return self._workers is not None

    def open(self) -> None:
        if self.is_open:
            self.refresh()
            return
        index = build_index(self.sourcepath, self.index or {})
        token = secrets.token_hex(16)
        server = FileServer(self.sourcepath, token)
        source_id = f"{socket.gethostname()}:{self.sourcepath}"
        try:
            self._procs = self.host_mesh.spawn_procs(name="remote_mount")
            self._workers = self._procs.spawn("remote_mount", RemoteMountWorker)
            paths = self._workers.mount.call(
                self.mntpoint, _shipped(index), routable_ip(), server.port, token, source_id,
                self.cache_dir, self.fetch_timeout).get()
        except BaseException:
            self._server = server
            self._teardown()
            raise
        self._server = server
        self.index = index
        self.mounted_at = [p for _, p in paths.items()]

    def refresh(self, sourcepath: str | None = None) -> None:
        """Serve the source's current tree on the hosts (no-op when nothing changed)."""
        if self._workers is None or self.index is None:
            raise RuntimeError(f"The remote mount of {self.sourcepath!r} is not open; call "
                               f"open() first.")
        index = build_index(self.sourcepath, self.index)
        if index == self.index:
            return
        self._workers.refresh.call(_shipped(index)).get()
        self.index = index

    def stats(self) -> dict[str, int]:
        """Totals over the hosts: bytes fetched from the source, round trips, cache hits."""
        total = {"fetched_bytes": 0, "fetches": 0, "hit_chunks": 0}
        if self._workers is not None:
            for _, one in self._workers.stats.call().get().items():
                for k in total:
                    total[k] += int(one[k])
        return total

    def close(self) -> None:
        if self._workers is None:
            return
        try:
            results = self._workers.unmount.call().get()
            failed = [f"{p}: {s} {d}" for p, (s, d) in results.items()
                      if s not in ("ok", "not_mounted")]
            if failed:
                raise RuntimeError(f"Unmounting the remote mount of {self.sourcepath!r} "
                                   f"failed: {'; '.join(failed)}.")
        finally:
            self._teardown()

    def _teardown(self) -> None:
        procs, self._procs, self._workers = self._procs, None, None
        server, self._server = self._server, None
        if procs is not None:
            try:
                procs.stop().get()
            except Exception as exc:  # noqa: BLE001 - a dead host must not keep the rest mounted
                logger.warning("remote mount %s: stopping its procs failed: %s",
                               self.sourcepath, exc)
        if server is not None:
            server.stop()


def remotemount(host_mesh: Any, sourcepath: str, mntpoint: str | None = None,
                **kwargs: Any) -> RemoteMount:
    """Mount the local directory `sourcepath` read-only at `mntpoint` (default: the same path)
    on every host of `host_mesh` once `open()` is called. Keywords: `cache_dir` (the hosts'
    chunk cache), `fetch_timeout` (seconds before a read the source does not serve fails)."""
    unknown = sorted(set(kwargs) - {"cache_dir", "fetch_timeout"})
    if unknown:
        raise TypeError(f"remotemount got unknown keywords {unknown}; it takes cache_dir and "
                        f"fetch_timeout.")
    return RemoteMount(host_mesh, sourcepath, mntpoint, **kwargs)

