"""`JobTrait`: a declarative job spec that a scheduler brings up, plus its cached state.

A job is a picklable spec (which meshes, how many hosts each) that also carries the scheduler's
handle once applied (worker pids, a Slurm job id, a Dask scheduler address). `state()` turns it
into live `HostMesh` objects. Live meshes are never pickled: attributes whose names start with
`_live` are dropped by `__getstate__`, so a dumped job reconnects when loaded. The alternative,
pickling connections, was rejected because a job file outlives the process that wrote it.

Subclasses implement `_create`, `_state`, `_kill` and `can_run`; only this class changes the
running status.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import pickle
import uuid
from typing import Any

from monarch._src.hosts.gateway import attach
from monarch._src.job.mounts import (
    adopt_mounts,
    apply_mounts,
    close_mounts,
    declare_gather_mount,
    declare_remote_mount,
    release_mounts,
)
from monarch._src.job.state import JobState
from monarch._src.job.telemetry_config import Telemetry, TelemetryConfig

__all__ = [
    "DEFAULT_JOB_PATH",
    "JobTrait",
    "MeshAdminConfig",
    "TelemetryConfig",
    "job_load",
    "job_loads",
]

# Where `state()` caches the running job and where the CLI finds it.
DEFAULT_JOB_PATH = ".monarch/job_state.pkl"


@dataclasses.dataclass
class MeshAdminConfig:
    """Settings of the mesh admin HTTP API that `enable_admin` starts at the next `state()`.

    `admin_addr`: where it listens, 'host:port' or '[v6]:port' (port 0: any free one); None:
    the `mesh_admin_addr` config key, else `MONARCH_DEBUG_SERVER_HOST`/`_PORT` (loopback by
    default). The API is served by the client's control server, so a client serves one address.
    """

    admin_addr: str | None = None

    def __post_init__(self) -> None:
        if self.admin_addr is not None:
            from monarch._src.admin.server import parse_admin_addr

            if not isinstance(self.admin_addr, str):
                raise TypeError(f"MeshAdminConfig.admin_addr must be a 'host:port' string or "
                                f"None, got {type(self.admin_addr).__name__}.")
            try:
                parse_admin_addr(self.admin_addr)
            except ValueError:
                raise ValueError(f"MeshAdminConfig.admin_addr must be 'host:port' (e.g. "
                                 f"'localhost:1729' or '[::]:0'), got {self.admin_addr!r}."
                                 ) from None


class JobTrait(abc.ABC):
    """A job: host meshes by name, brought up by `apply()` and reached through `state()`."""

    def __init__(self) -> None:
        self._status = "not_running"  # "running" between a successful apply() and kill()
        self._apply_id: str | None = None  # uuid4 hex of the last apply(); kept by dump/load
        self._telemetry_config: TelemetryConfig | None = None  # set by enable_telemetry
        self._admin_config: MeshAdminConfig | None = None  # set by enable_admin

    # -- lifecycle ---------------------------------------------------------------------------

    def apply(self, client_script: str | None = None) -> None:
        """Bring the job up unless it is already running; a no-op when it is."""
        if self._status == "running":
            return
        self._create(client_script)
        self._apply_id = uuid.uuid4().hex
        self._status = "running"

    def state(self, cached_path: str | None = DEFAULT_JOB_PATH) -> JobState:
        """The job's host meshes, bringing the job up (or reusing a cached one) first.

        A running job connects. Otherwise, if `cached_path` holds a running job that
        `can_run(self)`, that job is used (nothing new is started); an incompatible cached job is
        killed and its file removed. Else the job is applied and, when `cached_path` is not None,
        pickled there (directories are created; a symlink is followed).
        """
        if self._status == "running":
            return self._connect()
        cached = None if cached_path is None else cached_runner(cached_path, self)
        if cached is not None:
            cached._telemetry_config = self.__dict__.get("_telemetry_config")
            cached._admin_config = self.__dict__.get("_admin_config")
            return cached._connect()
        self.apply()
        state = self._connect()
        if cached_path is not None:
            self.dump(cached_path)
        return state

    def _connect(self) -> JobState:
        """`_state()`, with this job's telemetry started (once) and its fields filled in."""
        release_mounts(self)  # a host serves one client: the job's mount daemon steps aside
        state = self._state()
        apply_mounts(self, state)
        self._start_admin(state)
        config: TelemetryConfig | None = self.__dict__.get("_telemetry_config")
        if config is not None:
            from monarch._src.job._telemetry_query_client import QueryEngineClient

            telemetry = self.__dict__.get("_live_telemetry")
            if telemetry is None:
                telemetry = self.__dict__["_live_telemetry"] = Telemetry(config)
            telemetry.start(self._apply_id or uuid.uuid4().hex, state._hosts)
            url = telemetry.url
            assert url is not None  # start() leaves its server running
            state.telemetry_url = url
            state.query_engine_client = QueryEngineClient(url)
            if config.include_dashboard:
                state.dashboard_url = telemetry.mount_dashboard(state.admin_url)
        return state

    def kill(self) -> None:
        """Stop the job's hosts and everything on them; the job is no longer running."""
        telemetry = self.__dict__.pop("_live_telemetry", None)
        if telemetry is not None:
            telemetry.stop()
        close_mounts(self)
        self._kill()
        self._status = "not_running"

    @property
    def active(self) -> bool:
        """Whether the job was applied and not killed since."""
        return self._status == "running"

    @property
    def apply_id(self) -> str | None:
        """The id of the last `apply()` (None before the first)."""
        return self._apply_id

    # -- persistence -------------------------------------------------------------------------

    def dump(self, path: str) -> None:
        """Pickle the job to `path` (parents created, symlinks followed)."""
        target = os.path.realpath(path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(self.dumps())
        os.replace(tmp, target)

    def dumps(self) -> bytes:
        """The job as pickle bytes (live connections are not included)."""
        return pickle.dumps(self)

    def _attach_client(self, attach_to: str | None) -> None:
        """Bootstrap this process's client through the worker at `attach_to` (`attach`, for
        jobs whose client runs outside the cluster: `SlurmJob(out_of_cluster=True)`), once per
        job object; another address afterwards raises, since a client cannot detach."""
        if attach_to is None:
            return
        attached = self.__dict__.get("_live_client_gateway")
        if attached is not None:
            if attached != attach_to:
                raise RuntimeError(
                    f"client is already attached through {attached}, not {attach_to}; "
                    "detaching is not supported, so use a new process to attach through a "
                    "different address"
                )
            return
        attach(attach_to)
        self.__dict__["_live_client_gateway"] = attach_to

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_live")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.setdefault("_telemetry_config", None)  # a job pickled before the field
        self.__dict__.update(state)
        self._init_live()

    def _init_live(self) -> None:  # noqa: B027 - optional hook, a no-op without live state
        """Set the `_live*` attributes (connections of this process) to their empty values.

        Called by subclasses' `__init__` and after unpickling, where they are never present.
        """

    # -- observability --------------------------------------------------------------------------

    def enable_telemetry(
        self, config: TelemetryConfig | None = None, *, mesh_admin_config: Any = None, **kw: Any
    ) -> JobTrait:
        """Record telemetry from the next `state()` on: SQL over every host's tables through
        `state.query_engine_client` (see `TelemetryConfig`). `config` is a `TelemetryConfig`, or
        its fields are given as keywords. Returns the job."""
        if config is not None and kw:
            raise TypeError(
                f"{type(self).__name__}.enable_telemetry takes a TelemetryConfig or its fields "
                f"as keywords, not both (got config and {sorted(kw)}).")
        if config is not None and not isinstance(config, TelemetryConfig):
            raise TypeError(
                f"{type(self).__name__}.enable_telemetry expected a TelemetryConfig, got "
                f"{type(config).__name__}.")
        Telemetry.check_installed()
        self._telemetry_config = config if config is not None else TelemetryConfig(**kw)
        # As on torchmonarch, telemetry brings the mesh admin API (state.admin_url) along:
        # with `mesh_admin_config`, or the default unless the admin API is configured already.
        if mesh_admin_config is not None or self.__dict__.get("_admin_config") is None:
            self.enable_admin(mesh_admin_config)
        return self

    def enable_admin(self, config: MeshAdminConfig | None = None, **kw: Any) -> JobTrait:
        """Serve the mesh admin HTTP API from the next `state()` on, and set `state.admin_url`
        (`monarch._src.admin`: `/v1/root`, `/v1/tree`, `/v1/why`, ...). `config` is a
        `MeshAdminConfig`, or its fields are given as keywords. Returns the job."""
        if config is not None and kw:
            raise TypeError(
                f"{type(self).__name__}.enable_admin takes a MeshAdminConfig or its fields as "
                f"keywords, not both (got config and {sorted(kw)}).")
        if config is not None and not isinstance(config, MeshAdminConfig):
            raise TypeError(f"{type(self).__name__}.enable_admin expected a MeshAdminConfig, "
                            f"got {type(config).__name__}.")
        unknown = sorted(set(kw) - {f.name for f in dataclasses.fields(MeshAdminConfig)})
        if unknown:
            raise TypeError(f"{type(self).__name__}.enable_admin got unknown settings "
                            f"{unknown}; MeshAdminConfig has only admin_addr.")
        self._admin_config = config if config is not None else MeshAdminConfig(**kw)
        return self

    def _start_admin(self, state: JobState) -> None:
        """With `enable_admin`: serve the admin API (once per process) and fill `admin_url`."""
        config: MeshAdminConfig | None = self.__dict__.get("_admin_config")
        if config is not None:
            from monarch._src.admin.spawn import start_admin

            state.admin_url = start_admin(config.admin_addr).url

    def remote_mount(self, source: str, mntpoint: str | None = None, meshes: Any = None,
                     python_exe: str | None = ".venv/bin/python", **kw: Any) -> None:
        """Mount the local directory `source` read-only at `mntpoint` (default: the same path)
        on the hosts of `meshes` (default: all), from the next `state()` on (a later `state()`
        refreshes it). With `python_exe` (a path inside `source`; None to skip) those meshes'
        procs run that interpreter from the mount. Keywords: `cache_dir` (the hosts' chunk
        cache), `fetch_timeout` (seconds before a read the source does not serve fails with
        EIO). Needs FUSE on the hosts (`monarch._src.mount`)."""
        declare_remote_mount(self, source, mntpoint, meshes, python_exe, kw)

    def gather_mount(self, remote_mount_point: str, local_mount_point: str,
                     meshes: Any = None) -> None:
        """Mount each host's `remote_mount_point` (`$SUBDIR`: the host's key, e.g. `hosts_0`)
        read-only under `local_mount_point` from the next `state()` on; with several meshes,
        each under `local_mount_point/<mesh name>`. Needs FUSE on this host."""
        declare_gather_mount(self, remote_mount_point, local_mount_point, meshes)

    # -- scheduler hooks -----------------------------------------------------------------------

    @abc.abstractmethod
    def can_run(self, spec: JobTrait) -> bool:
        """Whether this running job can serve `spec` (same meshes, hosts still alive)."""

    @abc.abstractmethod
    def _create(self, client_script: str | None) -> None:
        """Start the job's hosts (the scheduler's submit)."""

    @abc.abstractmethod
    def _state(self) -> JobState:
        """Connect to the running hosts and return them by mesh name."""

    @abc.abstractmethod
    def _kill(self) -> None:
        """Stop the job's hosts."""


def job_load(filename: str = DEFAULT_JOB_PATH) -> JobTrait:
    """Load a job written by `dump` (or cached by `state()`); it keeps its apply id and status."""
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"No job file at {filename!r}. Run `monarch apply` (or job.state()) first."
        ) from None
    return job_loads(data)


def cached_runner(path: str, job: JobTrait) -> JobTrait | None:
    """The job cached at `path` when it is running and `can_run(job)` (it takes `job`'s mount
    declarations), else None: a cached job that cannot is killed and its state removed
    (`discard_state`)."""
    if not os.path.exists(path):
        return None
    cached = job_load(path)
    if cached.active and cached.can_run(job):
        adopt_mounts(cached, job)
        return cached
    discard_state(path, cached)
    return None


def discard_state(path: str, job: JobTrait) -> None:
    """Kill `job`, loaded from `path`, if it is running, and remove its state: the file itself,
    not a context's link to it (a symlink at `path` stays, dangling until the next apply)."""
    if job.active:
        job.kill()
    os.remove(os.path.realpath(path))


def job_loads(data: bytes) -> JobTrait:
    """Load a job from the bytes of `dumps()`."""
    job = pickle.loads(data)
    if not isinstance(job, JobTrait):
        raise TypeError(f"job_loads expected a pickled JobTrait, got {type(job).__name__}.")
    return job


# torchmonarch keeps every job class in `monarch._src.job.job`; code written for it imports them
# from there. Here each has a module of its own, which imports this one, hence the lazy lookup.
_MONARCH_PATH_NAMES = {
    "LocalJob": "monarch._src.job.local",
    "BatchJob": "monarch._src.job.local",
    "LoginJob": "monarch._src.job.login",
    "ProcessState": "monarch._src.job.login",
    "exec_command": "monarch._src.job.exec",
    "BashActor": "monarch._src.job.exec",
}


def __getattr__(name: str) -> Any:
    home = _MONARCH_PATH_NAMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
