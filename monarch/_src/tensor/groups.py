"""Worker side: `torch.distributed` process groups, one per set of engine ranks and backend.

Groups are built without `init_process_group` (no global state, so one proc can serve several
engines): a `ProcessGroupGloo` (CPU) or `ProcessGroupNCCL` (CUDA) over a `PrefixStore` of the
engine's `TCPStore`, which the controller hosts. Every member of a group executes the same
command in the same order, so creating a group lazily on first use is creation in lockstep.
"""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["GroupCache"]


class GroupCache:
    """Process groups of one worker, created on first use and kept for the engine's life."""

    def __init__(self, engine_id: str, rank: int, store_addr: tuple[str, int], timeout: float):
        self._engine_id = engine_id
        self._rank = rank  # this worker's engine rank
        self._store_addr = store_addr  # (host, port) of the controller's TCPStore
        self._timeout = datetime.timedelta(seconds=timeout)
        self._store: Any = None  # the TCPStore client, connected on first use
        self._groups: dict[tuple[str, tuple[int, ...]], Any] = {}  # (backend, members) -> group

    def _connect(self) -> Any:
        if self._store is None:
            from torch._C._distributed_c10d import TCPStore

            host, port = self._store_addr
            self._store = TCPStore(
                host, port, is_master=False, timeout=self._timeout, use_libuv=True
            )
        return self._store

    def get(self, members: tuple[int, ...], device: Any) -> Any:
        """The group over `members` (engine ranks, this worker among them) for `device`."""
        backend = "nccl" if getattr(device, "type", "cpu") == "cuda" else "gloo"
        key = (backend, members)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = self._create(backend, members)
        return group

    def _create(self, backend: str, members: tuple[int, ...]) -> Any:
        import torch.distributed as dist
        from torch._C._distributed_c10d import PrefixStore

        prefix = f"{self._engine_id}/{backend}/{','.join(map(str, members))}/"
        store = PrefixStore(prefix, self._connect())
        index = members.index(self._rank)
        if backend == "gloo":
            # torch's stub lacks ProcessGroupGloo._Options, the options its __init__ takes
            gloo = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
            gloo._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
            gloo._timeout = self._timeout
            return dist.ProcessGroupGloo(store, index, len(members), gloo)
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = self._timeout
        return dist.ProcessGroupNCCL(store, index, len(members), opts)

    def close(self) -> None:
        """Drop every group (their sockets close as they are collected)."""
        self._groups.clear()
        self._store = None
