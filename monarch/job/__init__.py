"""monarch.job: jobs that bring up host meshes, and running commands on them.

A job is a declarative spec: `ProcessJob({"trainers": 2})`, `SlurmJob({"trainers": 4}, ...)`,
`DaskJob(cluster, meshes={...})`. `job.state()` brings it up (or reuses the one cached in
`.monarch/job_state.pkl`) and returns its host meshes by name: `job.state().trainers`;
`job.apply("client.py")` runs a batch client that reuses the job. `hosts_from_config(name)` is
the same function as `monarch.actor.hosts_from_config`. `PortForwarder` is an actor that
forwards TCP ports between proc meshes. `exec_command` runs a plain program on every proc of a
host mesh (with the torchrun environment); `sync_workspace` ships a local directory to the
hosts. The `monarch` command line drives the same objects.

`DEFAULT_JOB_PATH` is where `job.state()` caches the applied job and where `job_load()` reads it
by default: `.monarch/job_state.pkl`.
"""

# The controller's facade first: jobs start monarch, which needs its wiring (hook slots) and
# the fork server that importing monarch.actor starts.
import monarch.actor  # noqa: F401
from monarch._src.hosts.remote import hosts_from_config
from monarch._src.job.current import load_current_job, set_current_job
from monarch._src.job.dask_job import DaskJob
from monarch._src.job.exec import exec_command
from monarch._src.job.job import (
    DEFAULT_JOB_PATH,
    JobTrait,
    MeshAdminConfig,
    TelemetryConfig,
    job_load,
    job_loads,
)
from monarch._src.job.local import LocalJob
from monarch._src.job.port_forward import PortForwarder
from monarch._src.job.process import ProcessJob
from monarch._src.job.shell import shell
from monarch._src.job.slurm import SlurmJob
from monarch._src.job.state import JobState
from monarch._src.job.workspace import SyncReport, sync_workspace

__all__ = [
    "DEFAULT_JOB_PATH",
    "DaskJob",
    "JobState",
    "JobTrait",
    "LocalJob",
    "MeshAdminConfig",
    "PortForwarder",
    "ProcessJob",
    "SlurmJob",
    "SyncReport",
    "TelemetryConfig",
    "exec_command",
    "hosts_from_config",
    "job_load",
    "job_loads",
    "load_current_job",
    "set_current_job",
    "shell",
    "sync_workspace",
]
