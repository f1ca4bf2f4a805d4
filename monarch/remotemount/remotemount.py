"""torchmonarch's `monarch.remotemount.remotemount` names.

`remotemount(host_mesh, sourcepath, mntpoint=None)` returns a handle with `open()`,
`refresh()` and `close()`; the layout functions (`build_index`, `materialise_block`,
`code_blocks`, `BLOCK_SIZE`) are the index of a mounted tree. `FUSEActor` is the worker actor of
torchmonarch's block mount, kept for code that drives it directly (mount an index, refresh,
unmount); our own remote mount uses `RemoteMountWorker`.
"""

from __future__ import annotations

import os
from typing import Any

from monarch._src.mount.chunked import FuseMountHandle, mount_chunked_fuse
from monarch._src.mount.fs import fusermount_unmount
from monarch._src.mount.layout import (
    BIG_FILE_THRESHOLD,
    BLOCK_SIZE,
    CBC_CHUNK,
    CBC_STREAMS,
    build_index,
    code_blocks,
    materialise_block,
    prepare_mount_point,
)
from monarch._src.mount.remote import RemoteMount, RemoteMountWorker, remotemount, resolve_subdir
from monarch.actor import Actor, endpoint

MountHandler = RemoteMount

__all__ = [
    "BIG_FILE_THRESHOLD",
    "BLOCK_SIZE",
    "CBC_CHUNK",
    "CBC_STREAMS",
    "FUSEActor",
    "MountHandler",
    "RemoteMountWorker",
    "build_index",
    "code_blocks",
    "materialise_block",
    "prepare_mount_point",
    "remotemount",
]


class FUSEActor(Actor):
    """A host's block mount driven by hand: `mount(mount_point, index)` mounts the tree with no
    bytes (reads fault to `handler.enqueue` when the handler has one), `unmount(mount_point)`
    returns ("ok" | "not_mounted" | "busy" | "error", detail)."""

    def __init__(self, handler: Any = None) -> None:
        self._handler = handler  # where faults go: an actor mesh with `enqueue`, else nowhere
        self._handle: FuseMountHandle | None = None

    @endpoint
    def mkdir(self, path: str) -> None:
        prepare_mount_point(resolve_subdir(path))

    @endpoint
    def mount(self, mount_point: str, meta: dict[str, Any]) -> None:
        if self._handle is not None:
            raise RuntimeError("This FUSEActor holds a mount already; unmount it first.")
        enqueue = getattr(self._handler, "enqueue", None)

        def fault(block: int) -> None:
            if enqueue is not None:
                enqueue.broadcast(int(block))

        self._handle = mount_chunked_fuse(meta, meta["/"]["total_size"],
                                          os.path.abspath(resolve_subdir(mount_point)), fault)

    @endpoint
    def refresh_mount(self, meta: dict[str, Any]) -> None:
        if self._handle is None:
            raise RuntimeError("This FUSEActor has no mount to refresh; mount one first.")
        self._handle.refresh(meta, meta["/"]["total_size"])

    @endpoint
    def unmount(self, mount_point: str) -> tuple[str, str]:
        path = os.path.abspath(resolve_subdir(mount_point))
        status, detail = fusermount_unmount(path, lazy_if_busy=False)
        if status == "ok":
            self._handle = None
        return status, detail
