"""A host mesh from inside a torchrun job, through its c10d store (`host_mesh_from_store`).

Every rank calls `host_mesh_from_store(store)`. The first rank of each host (LOCAL_RANK 0)
starts a worker process there (`run_worker_loop_forever`, in `_worker_entry.py`) and publishes
its address in the store under `monarch/spmd/workers/<group rank>`; global rank 0 reads every
host's address and attaches to them, returning the `HostMesh` (dimension `hosts`). The other
ranks return None. This is how torchstore (pytorch/torchtitan#3211) gets procs next to a
torchrun job without a monarch job.

A worker lives as long as the rank that started it: it holds the read end of a pipe whose
write end only that rank holds, and exits (its procs with it) when a read returns end of file,
which the kernel delivers however the rank ends (exit, crash, SIGKILL). So the ranks that
started workers must outlive rank 0's use of the mesh (end the job with a barrier).

The default transport is `ipc`: a unix-domain socket in a fresh temporary folder, for a job on
one machine; across machines pass `transport="tcp"` and an explicit `monarch_port` (port 0
would be chosen by the worker when it binds, too late for the address published before it).
Rejected alternative: letting the worker publish its own address once bound; the store is the
rank's, and the rank would then wait on its worker before returning.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import Protocol

from monarch._src.config import configure, get as config_get, parse_transport
from monarch._src.hosts.remote import attach_to_workers
from monarch._src.lowlevel import runtime_if_started
from monarch._src.mesh.host_mesh import HostMesh

__all__ = ["StoreLike", "host_mesh_from_store"]

logger = logging.getLogger(__name__)

# Monarch builds this under Buck as a PAR, which re-invokes itself to run a module; never here.
_IN_PAR = False
_WORKER_ENTRY_MODULE = "monarch._src.spmd._worker_entry"
_ADDR_ENV = "_MONARCH_WORKER_ADDR"  # the worker's listen address
_PARENT_WATCH_FD_ENV = "_MONARCH_WORKER_PARENT_WATCH_FD"  # the read end of the parent's pipe
_TRANSPORTS = ("tcp", "metatls", "metatls-hostname", "ipc")


class StoreLike(Protocol):
    """What `host_mesh_from_store` uses of a `torch.distributed.Store`."""

    def set(self, key: str, value: str | bytes) -> None: ...

    def get(self, key: str) -> bytes: ...


def host_mesh_from_store(
    store: StoreLike,
    *,
    monarch_port: int = 0,
    name: str = "monarch_worker",
    transport: str = "ipc",
    rank: int | None = None,
    local_rank: int | None = None,
    world_size: int | None = None,
    local_world_size: int | None = None,
) -> HostMesh | None:
    """Called on every rank of a torchrun job: a `HostMesh` of one worker per host on global
    rank 0, None on the others.

    The topology is torchrun's `RANK`, `LOCAL_RANK`, `WORLD_SIZE` and `LOCAL_WORLD_SIZE`
    unless the matching argument is given. `name` names the host mesh, and each worker
    `f"{name}_{group_rank}"`. `transport`: `"ipc"` (one machine) or `"tcp"` with
    `monarch_port` (the port every worker listens on, on its host's fully qualified name).
    """
    the_rank = _topology(rank, "RANK")
    the_local_rank = _topology(local_rank, "LOCAL_RANK")
    the_world_size = _topology(world_size, "WORLD_SIZE")
    the_local_world_size = _topology(local_world_size, "LOCAL_WORLD_SIZE")
    if the_local_world_size <= 0 or the_world_size % the_local_world_size != 0:
        raise ValueError(
            f"WORLD_SIZE ({the_world_size}) must be divisible by LOCAL_WORLD_SIZE "
            f"({the_local_world_size})"
        )
    hosts = the_world_size // the_local_world_size
    group_rank = the_rank // the_local_world_size
    _use_transport(transport)
    if the_local_rank == 0:
        addr, _pid = _spawn_worker_process(transport=transport, monarch_port=monarch_port,
                                           name=f"{name}_{group_rank}")
        store.set(_worker_addr_key(group_rank), addr.encode())
    if the_rank != 0:
        return None
    workers = [store.get(_worker_addr_key(g)).decode() for g in range(hosts)]
    return attach_to_workers(ca="trust_all_connections", workers=workers, name=name)


def _topology(given: int | None, var: str) -> int:
    if given is not None:
        return given
    value = os.environ.get(var)
    if value is None:
        raise RuntimeError(
            f"host_mesh_from_store needs the {var} environment variable (torchrun sets RANK, "
            f"LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE) or the matching keyword argument."
        )
    return int(value)


def _use_transport(transport: str) -> None:
    """This process's client listens with `transport` (what `enable_transport` does), so the
    workers on this machine can reach it; refused once monarch started with another."""
    if transport in ("metatls", "metatls-hostname"):
        return  # refused by _worker_address, with what to use instead
    value = parse_transport(transport)
    if runtime_if_started() is not None:
        if value != config_get("default_transport"):
            raise RuntimeError(
                f"host_mesh_from_store(transport={transport!r}) must run before monarch starts "
                "in this rank; the runtime already uses another transport. Call it first."
            )
        return
    configure(default_transport=value)


def _worker_addr_key(group_rank: int) -> str:
    return f"monarch/spmd/workers/{group_rank}"


def _worker_address(transport: str, *, monarch_port: int, name: str,
                    ipc_dir: str | None) -> str:
    """The address a worker listens on; port 0 is refused (the address is published before the
    worker binds it)."""
    if transport not in _TRANSPORTS:
        raise ValueError(
            f"unsupported transport {transport!r}; expected one of 'tcp', 'metatls', "
            "'metatls-hostname', 'ipc'"
        )
    if transport == "ipc":
        assert ipc_dir is not None  # made by the caller for ipc
        return f"ipc://{ipc_dir}/{name}"
    if monarch_port == 0:
        raise ValueError(
            f"monarch_port must be an explicit non-zero port for transport {transport!r}: "
            "the worker's address is published before it binds."
        )
    if transport != "tcp":
        raise ValueError(
            f"transport {transport!r} is Meta's TLS, which this version does not have; use "
            "transport='tcp' (with enable_tls configured for TLS)."
        )
    return f"tcp://{socket.getfqdn()}:{monarch_port}"


def _spawn_worker_process(
    *,
    transport: str = "ipc",
    monarch_port: int = 0,
    name: str = "monarch_worker",
    env: Mapping[str, str] | None = None,
) -> tuple[str, int]:
    """Start a worker process serving at a fresh address; returns (address, pid). It exits when
    this process does (the pipe, above); a thread here reaps it and logs its exit."""
    # The folder is left behind when the worker ends (the worker removes its socket): a kill
    # leaves nothing that could remove it, as on Monarch.
    ipc_dir = tempfile.mkdtemp(prefix="monarch_worker_") if transport == "ipc" else None
    addr = _worker_address(transport, monarch_port=monarch_port, name=name, ipc_dir=ipc_dir)
    watch_r, watch_w = os.pipe()
    child_env = {**os.environ, _ADDR_ENV: addr, _PARENT_WATCH_FD_ENV: str(watch_r),
                 **(env or {})}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", _WORKER_ENTRY_MODULE], env=child_env,
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, pass_fds=(watch_r,),
        )
    except BaseException:
        os.close(watch_r)
        os.close(watch_w)
        raise
    os.close(watch_r)
    # watch_w stays open, unused, for this process's whole life: its closing is the signal.
    logger.info("monarch worker %s started, pid %d, at %s", name, proc.pid, addr)
    threading.Thread(target=_reap, args=(proc, name, addr), daemon=True,
                     name=f"monarch-worker-watch-{name}").start()
    return addr, proc.pid


def _reap(proc: subprocess.Popen[bytes], name: str, addr: str) -> None:
    code = proc.wait()
    log = logger.info if code == 0 else logger.warning
    log("monarch worker %s (pid %d, %s) exited with %d", name, proc.pid, addr, code)
