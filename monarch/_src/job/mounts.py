"""A job's declared mounts (`job.remote_mount`, `job.gather_mount`), applied at `state()`.

Declarations are part of the job's spec and are pickled with it; the live mounts are this
process's (`_live_mounts`, never pickled), opened at the first `state()` and refreshed at the
next ones, closed by `kill()`. The source of a remote mount is served by the process that
opened it: when that process exits, the hosts' mounts go with it, and the next client's
`state()` mounts again (the hosts' chunk caches make that incremental). torchmonarch keeps the
mounts in a background sidecar process instead, so they outlive the client; rejected here, as a
process outliving every client is one more thing for `kill()` to find.
"""

from __future__ import annotations

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


def apply_mounts(job: Any, state: JobState) -> None:
    """Open (or refresh) the job's mounts on `state`'s meshes and point each mesh whose remote
    mount carries a `python_exe` at that interpreter."""
    specs: list[Any] = job.__dict__.get("_mount_specs") or []
    if not specs:
        return
    from monarch._src.mount.gather import GatherMount
    from monarch._src.mount.remote import RemoteMount

    live: dict[tuple[int, str], Any] = job.__dict__.setdefault("_live_mounts", {})
    hosts = dict(state._hosts)
    exes: dict[str, str] = {}
    for i, spec in enumerate(specs):
        names = [n for n in hosts if spec.meshes is None or n in spec.meshes]
        missing = sorted(set(spec.meshes or ()) - set(hosts))
        if missing:
            raise ValueError(f"{type(job).__name__}: a mount names meshes {missing} the job "
                             f"does not have (it has {sorted(hosts)}).")
        for name in names:
            handle = live.get((i, name))
            if isinstance(spec, RemoteMountSpec):
                if handle is None:
                    handle = RemoteMount(hosts[name], spec.source, spec.mntpoint, **spec.kwargs)
                    handle.open()
                    live[(i, name)] = handle
                else:
                    handle.refresh()
                if spec.python_exe is not None:
                    exes[name] = spec.python_exe
            elif handle is None:
                local = (os.path.join(spec.local_mount_point, name) if len(names) > 1
                         else spec.local_mount_point)
                live[(i, name)] = GatherMount(hosts[name], spec.remote_mount_point, local)
    for name, exe in exes.items():
        state._hosts[name] = hosts[name].with_python_executable(exe)


def close_mounts(job: Any) -> None:
    """Unmount everything this process mounted for the job (a failure is logged, the rest
    still close)."""
    live: dict[Any, Any] = job.__dict__.pop("_live_mounts", None) or {}
    for handle in live.values():
        try:
            handle.close()
        except Exception as exc:  # noqa: BLE001 - one bad host must not keep the others mounted
            logger.warning("closing a mount of %s failed: %s", type(job).__name__, exc)
