"""Workspace shipping: a local directory (a project, a virtual environment) synced to hosts.

One `WorkspaceReceiver` actor per host answers with a manifest of what it holds (path -> content
hash, file mode, symlink target) and applies a patch: the files whose hash differs, the links
that changed, the paths that are gone. Only changed files travel, over the monarch transport
like any other message. Hashes are cached on both sides by (size, mtime_ns) so an unchanged tree
is not re-read. rsync was rejected: it needs ssh between the machines, and the transport is
already there.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

from monarch._src.job.blocking import wait_for
from monarch._src.lowlevel import Progress
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.host_mesh import HostMesh

__all__ = ["HOST_WORKSPACE_DIR", "SyncReport", "WorkspaceReceiver", "default_dest", "on_host",
           "scan", "sync_workspace"]

# Bound on each remote step of a sync.
_TIMEOUT = 120.0
# Name of the hash cache kept at the root of a synced directory (never itself synced).
_CACHE = ".monarch-workspace.json"

# An entry: ("file", sha256 hex, mode) or ("link", target, 0).
Entry = tuple[str, str, int]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _local_cache(root: str) -> str:
    tag = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"monarch-workspace-{tag}.json")


def scan(root: str, cache_path: str | None = None) -> dict[str, Entry]:
    """The manifest of `root`: relative path -> entry, using and refreshing the hash cache.

    The cache lives at `cache_path` (default: `root/.monarch-workspace.json`, which is never
    part of the manifest).
    """
    cache_path = cache_path or os.path.join(root, _CACHE)
    try:
        with open(cache_path) as f:
            cache: dict[str, list[Any]] = json.load(f)
    except (OSError, ValueError):
        cache = {}
    fresh: dict[str, list[Any]] = {}
    manifest: dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(
                os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if rel == _CACHE or "__pycache__" in rel.split(os.sep):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                manifest[rel] = ("link", os.readlink(full), 0)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            key = [st.st_size, st.st_mtime_ns]
            old = cache.get(rel)
            digest = old[2] if old and old[:2] == key else _sha256(full)
            fresh[rel] = [*key, digest]
            manifest[rel] = ("file", digest, stat.S_IMODE(st.st_mode))
    try:
        with open(cache_path, "w") as f:
            json.dump(fresh, f)
    except OSError:
        pass  # a read-only tree is scanned again next time
    return manifest


def default_dest(local_dir: str) -> str:
    """Where a directory lands on a host: `~/.monarch/workspaces/<name>-<hash of its path>`."""
    path = os.path.realpath(local_dir)
    tag = hashlib.sha256(path.encode()).hexdigest()[:8]
    root = os.environ.get("MONARCH_WORKSPACE_ROOT") or os.path.expanduser("~/.monarch/workspaces")
    return os.path.join(root, f"{os.path.basename(path)}-{tag}")


# A destination starting with this is under the host's workspace root, read on the host.
HOST_WORKSPACE_DIR = "$WORKSPACE_DIR"


def on_host(dest: str) -> str:
    """`dest` as a path on this host: `$WORKSPACE_DIR/...` becomes the host's `WORKSPACE_DIR`
    (or `~/.monarch/workspace` where that is unset)."""
    if not dest.startswith(HOST_WORKSPACE_DIR):
        return dest
    root = os.environ.get("WORKSPACE_DIR") or os.path.expanduser("~/.monarch/workspace")
    return os.path.join(root, dest[len(HOST_WORKSPACE_DIR):].lstrip("/"))


class WorkspaceReceiver(Actor):
    """Holds a synced directory on one host: reports its manifest and applies patches."""

    @endpoint
    def manifest(self, dest: str) -> dict[str, Entry]:
        """The manifest of `dest` on this host (empty if it does not exist yet)."""
        dest = on_host(dest)
        if not os.path.isdir(dest):
            return {}
        return scan(dest)

    @endpoint
    def apply(
        self, dest: str, files: dict[str, tuple[bytes, int]], links: dict[str, str],
        removed: list[str],
    ) -> int:
        """Write `files` (contents, mode), create `links`, delete `removed`; returns a count."""
        base = os.path.realpath(on_host(dest))
        os.makedirs(base, exist_ok=True)

        def inside(rel: str) -> str:
            full = os.path.realpath(os.path.join(base, os.path.dirname(rel)))
            if full != base and not full.startswith(base + os.sep):
                raise ValueError(f"Workspace path {rel!r} leaves the workspace {dest!r}.")
            return os.path.join(full, os.path.basename(rel))

        for rel in removed:
            path = inside(rel)
            try:
                os.remove(path)
            except FileNotFoundError:
                pass  # another host of this machine removed it first
        for rel, (data, mode) in files.items():
            path = inside(rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # unique: several hosts of one machine may sync into the same directory at once
            tmp = f"{path}.monarch-tmp-{os.getpid()}-{threading.get_ident()}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        for rel, target in links.items():
            path = inside(rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.monarch-tmp-{os.getpid()}-{threading.get_ident()}"
            os.symlink(target, tmp)
            os.replace(tmp, path)
        return len(files) + len(links) + len(removed)


@dataclass
class SyncReport:
    """What a sync did: the destination and, per host rank, the paths sent and removed."""

    dest: str
    sent: dict[int, list[str]] = field(default_factory=dict)
    removed: dict[int, list[str]] = field(default_factory=dict)

    @property
    def files_sent(self) -> int:
        """Total number of files and links sent to all hosts."""
        return sum(len(v) for v in self.sent.values())


def sync_workspace(host_mesh: HostMesh, local_dir: str, dest: str | None = None) -> SyncReport:
    """Make `dest` on every host of `host_mesh` a copy of `local_dir`; only changes travel.

    Files are compared by content hash, so a second sync of an unchanged tree sends nothing and a
    changed file travels alone; files deleted locally are deleted remotely. `dest` defaults to
    `default_dest(local_dir)`; one starting with `$WORKSPACE_DIR` is resolved on each host
    (`on_host`). Returns a `SyncReport`. The bytes sent are reported as a `Progress` as each
    host confirms them (shown per the `progress` config key).
    """
    if not os.path.isdir(local_dir):
        raise NotADirectoryError(
            f"Workspace {local_dir!r} is not a directory. Pass a project or venv directory."
        )
    dest = dest or default_dest(local_dir)
    local = scan(local_dir, _local_cache(local_dir))
    report = SyncReport(dest=dest)
    procs = host_mesh.spawn_procs(name="workspace")
    try:
        receivers: Any = procs.spawn("_WorkspaceReceiver", WorkspaceReceiver)
        flat = receivers.flatten("hosts_flat") if procs.sizes else receivers
        remote = wait_for(flat.manifest.call(dest), _TIMEOUT)
        pending: list[tuple[Any, int]] = []  # (apply future, bytes sent) per host
        for point, theirs in remote.items():
            files: dict[str, tuple[bytes, int]] = {}
            links: dict[str, str] = {}
            for rel, entry in local.items():
                if theirs.get(rel) == entry:
                    continue
                if entry[0] == "link":
                    links[rel] = entry[1]
                else:
                    with open(os.path.join(local_dir, rel), "rb") as f:
                        files[rel] = (f.read(), entry[2])
            removed = sorted(set(theirs) - set(local))
            report.sent[point.rank] = sorted([*files, *links])
            report.removed[point.rank] = removed
            if files or links or removed:
                target = flat.slice(hosts_flat=point.rank) if procs.sizes else flat
                pending.append((target.apply.call_one(dest, files, links, removed),
                                sum(len(data) for data, _ in files.values())))
        if pending:
            title = f"workspace {os.path.basename(os.path.realpath(local_dir))}"
            with Progress(title, sum(n for _, n in pending), "B") as progress:
                for fut, sent in pending:
                    wait_for(fut, _TIMEOUT)
                    progress.advance(sent)
                hosts = len(report.sent)
                progress.close(detail=f"synced to {hosts} host{'s' if hosts != 1 else ''}")
        return report
    finally:
        wait_for(procs.stop(), _TIMEOUT)
