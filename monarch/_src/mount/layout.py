"""The packed layout of a mounted directory: one index that is both the file tree and the map
from files to byte ranges of a virtual "pack".

`build_index` walks the source once. Each regular file gets a `global_offset` in the pack; a
refresh keeps the offsets of unchanged files (same size and mtime) and appends new or changed
files block-aligned past the previous end, so a block id that was delivered once never changes
meaning. `materialise_block` re-reads one block from the source, checking each file against the
(size, mtime) it had when indexed: a file that changed since is filled with random bytes and
reported, so a reader gets EIO rather than a mix of old and new bytes.

These names and their behaviour are torchmonarch 0.7.0's `monarch.remotemount.remotemount`
ones (the chunked FUSE binding and its tests use them). Our own remote mount
(`monarch._src.mount.remote`) addresses data per file chunk instead of per pack block: a changed
file then moves only its own bytes, whatever its place in the pack.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

# Files at least this big are "libraries or data" (fetched when read); smaller ones are "code".
BIG_FILE_THRESHOLD: int = 1 * 1024 * 1024
# The unit of block addressing in the pack: a byte at pack offset `o` is in block o // BLOCK_SIZE.
BLOCK_SIZE: int = 64 * 1024 * 1024
# torchmonarch's chain-broadcast tuning constants; kept for code that imports them (no chain
# broadcast here: blocks move over the mount's own connections).
CBC_CHUNK: int = 64 * 1024
CBC_STREAMS: int = 128

# Directories never mounted: the client's job state churns on every `monarch exec`.
EXCLUDED_DIRS: frozenset[str] = frozenset({".monarch"})

ATTR_KEYS: tuple[str, ...] = (
    "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid",
)

Index = dict[str, dict[str, Any]]


def attrs_of(st: os.stat_result) -> dict[str, Any]:
    """The stat fields a mount serves, atime pinned to mtime (reading must not change an index)."""
    attr: dict[str, Any] = {key: getattr(st, key) for key in ATTR_KEYS}
    attr["st_atime"] = attr["st_mtime"]
    return attr


def _child_path(vdir: str, name: str) -> str:
    return f"{vdir.rstrip('/')}/{name}"


def build_index(source_path: str, previous: Mapping[str, Any]) -> Index:
    """Walk `source_path` into an index `{vpath: node}` (vpath "/" is the root).

    Directory nodes have `attr` and `children`; symlinks `attr` and `link_target`; regular files
    `attr`, `file_len`, `mtime_ns`, `full_path` and `global_offset`. The root also carries
    `total_size`, the pack's length. `previous` is the last index of the same source ({} for a
    fresh layout): its unchanged files keep their offsets. The walk stays on the source's file
    system (a directory on another device is listed, empty) and skips `.monarch`.
    """
    root = os.path.abspath(source_path)
    root_st = os.stat(root)
    index: Index = {}
    pending: list[str] = []  # new or changed files, placed after the walk
    todo: list[tuple[str, str, os.stat_result]] = [(root, "/", root_st)]
    while todo:
        real_dir, vdir, dir_st = todo.pop()
        with os.scandir(real_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        names: list[str] = []
        for entry in entries:
            vpath = _child_path(vdir, entry.name)
            if entry.is_symlink():
                index[vpath] = {"attr": attrs_of(entry.stat(follow_symlinks=False)),
                                "link_target": os.readlink(entry.path)}
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in EXCLUDED_DIRS:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    logger.warning("build_index: cannot stat %r; left out.", entry.path)
                    continue
                if st.st_dev == root_st.st_dev:
                    todo.append((entry.path, vpath, st))
                else:
                    # Another file system (a mount point inside the source): shown empty, so
                    # a FUSE mount of the destination inside the source cannot recurse.
                    index[vpath] = {"attr": attrs_of(st), "children": []}
            else:
                st = entry.stat(follow_symlinks=False)
                node: dict[str, Any] = {"attr": attrs_of(st), "file_len": st.st_size,
                                        "mtime_ns": st.st_mtime_ns, "full_path": entry.path}
                old = previous.get(vpath)
                if (old is not None and old.get("file_len") == st.st_size
                        and old.get("mtime_ns") == st.st_mtime_ns
                        and old.get("global_offset") is not None):
                    node["global_offset"] = old["global_offset"]
                else:
                    pending.append(vpath)
                index[vpath] = node
            names.append(entry.name)
        index[vdir] = {"attr": attrs_of(dir_st), "children": names}

    end = int(previous.get("/", {}).get("total_size", 0))
    if pending and end % BLOCK_SIZE:
        end += BLOCK_SIZE - end % BLOCK_SIZE
    # Code first: the small files of one generation share the first blocks of its region.
    pending.sort(key=lambda v: index[v]["file_len"] >= BIG_FILE_THRESHOLD)
    for vpath in pending:
        index[vpath]["global_offset"] = end
        end += index[vpath]["file_len"]
    index["/"]["total_size"] = end
    return index


def code_blocks(index: Mapping[str, Any]) -> set[int]:
    """The blocks holding at least one byte of a small (code) file."""
    blocks: set[int] = set()
    for node in index.values():
        offset = node.get("global_offset")
        size = node.get("file_len", 0)
        if offset is None or size == 0 or size >= BIG_FILE_THRESHOLD:
            continue
        blocks.update(range(offset // BLOCK_SIZE, (offset + size - 1) // BLOCK_SIZE + 1))
    return blocks


def materialise_block(index: Mapping[str, Any], block: int,
                      buf: bytearray) -> tuple[bytes, int, list[str]]:
    """Read pack block `block` from the source into `buf` (a reusable BLOCK_SIZE buffer).

    Returns `(data, used, diverged)`: the block's bytes, the length of its prefix that files
    reach (0 when none does), and the vpaths of files whose size or mtime no longer match the
    index (their bytes are random, never their new content). Bytes no file covers are left as
    they were in `buf`. A block at or past `total_size` raises ValueError (a stale index).
    """
    total = int(index["/"]["total_size"])
    start = block * BLOCK_SIZE
    if block < 0 or start >= total:
        raise ValueError(f"Block {block} is outside the pack (offset {start}, total_size "
                         f"{total}): the index is stale or the block id is wrong.")
    stop = start + BLOCK_SIZE
    view = memoryview(buf)
    used = 0
    diverged: list[str] = []
    for vpath, node in index.items():
        offset = node.get("global_offset")
        if offset is None:
            continue
        lo, hi = max(offset, start), min(offset + node["file_len"], stop)
        if lo >= hi:
            continue
        used = max(used, hi - start)
        dst = view[lo - start:hi - start]
        if not _read_fenced(node, lo - offset, dst):
            dst[:] = os.urandom(hi - lo)
            diverged.append(vpath)
    return bytes(buf), used, diverged


def _read_fenced(node: Mapping[str, Any], file_offset: int, dst: memoryview) -> bool:
    """Fill `dst` from the node's file at `file_offset`; False if the file changed or vanished."""
    try:
        with open(node["full_path"], "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size != node["file_len"] or st.st_mtime_ns != node["mtime_ns"]:
                return False
            f.seek(file_offset)
            got = f.readinto(dst)
            return got == len(dst)
    except OSError:
        return False


def point_key(point: Mapping[str, int]) -> str:
    """A mesh point as a path component: {"hosts": 1} -> "hosts_1"; the empty point -> ""."""
    return "_".join(f"{k}_{v}" for k, v in point.items())


def prepare_mount_point(path: str) -> None:
    """Create the directory `path`, lazily unmounting a dead FUSE mount left there first."""
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        lazy_unmount(path)
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        if exc.errno not in (107, 5):  # ENOTCONN, EIO: a FUSE mount whose server died
            raise
        lazy_unmount(path)
        os.makedirs(path, exist_ok=True)


def lazy_unmount(path: str) -> bool:
    """Detach the mount at `path` (fusermount3, else umount); True if one was detached."""
    for cmd in (["fusermount3", "-u", "-z", path], ["umount", "-l", path]):
        try:
            if subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0:
                return True
        except (OSError, subprocess.TimeoutExpired):
            continue  # that tool is missing or hung: try the next one
    return False
