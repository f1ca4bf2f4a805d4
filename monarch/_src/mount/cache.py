"""A host's cache of mounted file chunks, shared by every mount on the host.

A chunk is `CHUNK_SIZE` bytes of one file. Its key hashes the source's id, the file's path,
size and mtime (the version the index recorded) and the chunk's number: the same version of a
file has the same keys in every mount, so a second mount of an unchanged tree finds everything
here and moves nothing, and a changed file moves only its own chunks. Entries are written to a
temporary name and renamed, so a reader never sees half a chunk; nothing is evicted (delete the
directory to reclaim the space).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from typing import Any

CHUNK_SIZE: int = 4 * 1024 * 1024


def default_cache_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "monarch-mount-cache")


def chunk_key(source_id: str, vpath: str, node: Mapping[str, Any], chunk: int) -> str:
    version = f"{source_id}\0{vpath}\0{node.get('file_len')}\0{node.get('mtime_ns')}\0{chunk}"
    return hashlib.sha256(version.encode("utf-8", "surrogateescape")).hexdigest()


class ChunkCache:
    """Chunks by key under `root` (`root/ab/abcdef...`)."""

    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(root, exist_ok=True)

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key)

    def has(self, key: str) -> bool:
        return os.path.exists(self._path(key))

    def read(self, key: str, offset: int, length: int) -> bytes | None:
        """`length` bytes at `offset` of the chunk, or None when it is not cached."""
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # already renamed or never written
            raise
