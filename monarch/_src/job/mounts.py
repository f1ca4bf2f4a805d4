"""A job's declared mounts (`job.remote_mount`, `job.gather_mount`), applied at `state()`.

Declarations are part of the job's spec and are pickled with it. Where the live mounts are
(never pickled) depends on the process:

* By default they are this process's (`_live_mounts`): opened at the first `state()`,
  refreshed at the next ones, closed by `kill()`. The source of a remote mount is served by the
  process that opened it, so when it exits the hosts' mounts go with it and the next client's
  `state()` mounts again (the hosts' chunk caches make that incremental).
* Between `monarch` commands they are kept by the job's mount daemon (`mount_daemon`, one per
  applied job, as torchmonarch's job sidecar): `monarch apply` starts (or refreshes, or, for
  other declarations, replaces) it and exits with the gather mount mounted and the remote
  mounts served. A host serves one client at a time, so any process about to attach to the job
  stops the daemon (`release_mounts`) and mounts for itself; a process that called
  `use_mount_daemon()` (the command line) hands the mounts back to a new daemon as it exits.
  `kill()` stops the daemon before the hosts.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
from typing import Any

from monarch._src.job.state import JobState

logger = logging.getLogger(__name__)

_REMOTE_KWARGS = frozenset({"cache_dir", "fetch_timeout"})


@dataclasses.dataclass
class RemoteMountSpec:
    source: str  # absolute path on the controller
    mntpoint: str | None  # on the hosts; None: the source's path
    meshes: list[str] | None  # None: every mesh of the job
    python_exe: str | None  # the interpreter on the hosts, inside the mount; None: unchanged
    kwargs: dict[str, Any]


@dataclasses.dataclass
class GatherMountSpec:
    remote_mount_point: str
    local_mount_point: str
    meshes: list[str] | None


def _check_meshes(who: str, meshes: Any) -> list[str] | None:
    if meshes is None:
        return None
    if isinstance(meshes, str) or not all(isinstance(m, str) for m in meshes):
        raise TypeError(f"{who}: meshes must be a list of mesh names or None, got {meshes!r}.")
    return list(meshes)


def declare_remote_mount(job: Any, source: str, mntpoint: str | None, meshes: Any,
                         python_exe: str | None, kwargs: dict[str, Any]) -> None:
    who = f"{type(job).__name__}.remote_mount"
    unknown = sorted(set(kwargs) - _REMOTE_KWARGS)
    if unknown:
        raise TypeError(f"{who} got unknown keywords {unknown}; it takes cache_dir and "
                        f"fetch_timeout besides source, mntpoint, meshes and python_exe.")
    abs_source = os.path.abspath(source)
    if not os.path.isdir(abs_source):
        raise ValueError(f"{who}: the source {source!r} is not a directory.")
    exe_on_hosts = None
    if python_exe is not None:
        local_exe = os.path.join(abs_source, python_exe)
        if not os.path.isfile(local_exe):
            raise ValueError(
                f"python_exe '{python_exe}' not found locally at '{local_exe}'. Ensure the "
                f"virtual environment exists in '{source}' before calling remote_mount.")
        where = os.path.abspath(mntpoint) if mntpoint is not None else abs_source
        exe_on_hosts = os.path.join(where, python_exe)
    spec = RemoteMountSpec(abs_source, mntpoint, _check_meshes(who, meshes), exe_on_hosts,
                           dict(kwargs))
    job.__dict__.setdefault("_mount_specs", []).append(spec)


def declare_gather_mount(job: Any, remote_mount_point: str, local_mount_point: str,
                         meshes: Any) -> None:
    who = f"{type(job).__name__}.gather_mount"
    spec = GatherMountSpec(remote_mount_point, os.path.abspath(local_mount_point),
                           _check_meshes(who, meshes))
    job.__dict__.setdefault("_mount_specs", []).append(spec)


def adopt_mounts(cached: Any, spec: Any) -> None:
    """A cached job serving `spec` takes the mounts `spec` declares."""
    cached.__dict__["_mount_specs"] = list(spec.__dict__.get("_mount_specs") or [])


_DAEMON = {"wanted": False}  # True in a process that keeps its jobs' mounts in a daemon


def use_mount_daemon(enabled: bool = True) -> None:
    """From now on, this process keeps the mounts of the jobs it connects in a mount daemon that
    outlives it (what the `monarch` command does), instead of mounting them itself."""
    _DAEMON["wanted"] = enabled


def mount_specs(job: Any) -> list[Any]:
    """The mounts `job` declares, in declaration order."""
    return list(job.__dict__.get("_mount_specs") or [])


def gather_mount_points(job: Any) -> list[tuple[str, str]]:
    """(remote mount point, local mount point) of each gather mount `job` declares."""
    return [(s.remote_mount_point, s.local_mount_point) for s in mount_specs(job)
            if isinstance(s, GatherMountSpec)]


def apply_mounts(job: Any, state: JobState) -> None:
    """Open (or refresh) the job's mounts on `state`'s meshes from this process, and point each
    mesh whose remote mount carries a `python_exe` at that interpreter. In a process that
    `use_mount_daemon()`, the mounts go back to the job's daemon when the process exits."""
    specs = mount_specs(job)
    if not specs:
        return
    if _DAEMON["wanted"] and "_live_mounts" not in job.__dict__:
        # Registered before the mounts open, so it runs after their own exit hooks (LIFO).
        atexit.register(_hand_back, job)
    open_mounts_here(job, state)
    hosts = dict(state._hosts)
    for spec in specs:
        if isinstance(spec, RemoteMountSpec) and spec.python_exe is not None:
            for name in _mesh_names(job, spec, hosts):
                state._hosts[name] = hosts[name].with_python_executable(spec.python_exe)


def release_mounts(job: Any) -> None:
    """Before this process attaches to the job's hosts: stop the job's mount daemon if it runs
    (a host serves one client at a time, and the daemon is one)."""
    if job.apply_id is not None and mount_specs(job):
        from monarch._src.job import mount_daemon

        mount_daemon.stop(job)


def _hand_back(job: Any) -> None:
    close_mounts_here(job)
    if job.active:
        from monarch._src.job import mount_daemon

        # It attaches once this process has detached from the hosts (it exits next).
        mount_daemon.start(job, wait=False)


def start_mounts(job: Any) -> None:
    """Bring the mount daemon of an applied job in line with its declarations: started (or
    refreshed, or replaced) when it declares mounts, stopped when it declares none."""
    from monarch._src.job import mount_daemon

    if mount_specs(job):
        mount_daemon.ensure(job)
    else:
        mount_daemon.stop(job)


def _mesh_names(job: Any, spec: Any, hosts: dict[str, Any]) -> list[str]:
    missing = sorted(set(spec.meshes or ()) - set(hosts))
    if missing:
        raise ValueError(f"{type(job).__name__}: a mount names meshes {missing} the job "
                         f"does not have (it has {sorted(hosts)}).")
    return [n for n in hosts if spec.meshes is None or n in spec.meshes]


def open_mounts_here(job: Any, state: JobState) -> None:
    """Open the job's mounts from this process (refreshing the remote mounts open already)."""
    from monarch._src.mount.gather import GatherMount
    from monarch._src.mount.remote import RemoteMount

    live: dict[tuple[int, str], Any] = job.__dict__.setdefault("_live_mounts", {})
    hosts = dict(state._hosts)
    for i, spec in enumerate(mount_specs(job)):
        names = _mesh_names(job, spec, hosts)
        for name in names:
            handle = live.get((i, name))
            if isinstance(spec, RemoteMountSpec):
                if handle is None:
                    handle = RemoteMount(hosts[name], spec.source, spec.mntpoint, **spec.kwargs)
                    handle.open()
                    live[(i, name)] = handle
                else:
                    handle.refresh()
            elif handle is None:
                local = (os.path.join(spec.local_mount_point, name) if len(names) > 1
                         else spec.local_mount_point)
                live[(i, name)] = GatherMount(hosts[name], spec.remote_mount_point, local)


def close_mounts(job: Any) -> None:
    """Stop the job's mount daemon if it has one, and unmount everything this process mounted
    for the job (a failure is logged, the rest still close)."""
    if job.apply_id is not None:
        from monarch._src.job import mount_daemon

        mount_daemon.stop(job)
    close_mounts_here(job)


def close_mounts_here(job: Any) -> None:
    """Unmount everything this process mounted for the job."""
    live: dict[Any, Any] = job.__dict__.pop("_live_mounts", None) or {}
    for handle in live.values():
        try:
            handle.close()
        except Exception as exc:  # noqa: BLE001 - one bad host must not keep the others mounted
            logger.warning("closing a mount of %s failed: %s", type(job).__name__, exc)
