"""`LocalJob` (every mesh is this machine) and `BatchJob` (a job running a client script)."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from monarch._src.job.job import DEFAULT_JOB_PATH, JobTrait
from monarch._src.job.pids import child, remember
from monarch._src.job.state import JobState

__all__ = ["BatchJob", "LocalJob", "check_client_script", "launch_batch_client"]


class LocalJob(JobTrait):
    """A job whose meshes are all `this_host()`; nothing is started, nothing to kill.

    `apply(client_script)` runs the script as a detached batch client (environment
    `MONARCH_BATCH_JOB=1`, output under `.monarch/logs/`): its own `job.state()` finds the batch
    job cached in `.monarch/job_state.pkl` and uses it.
    """

    def __init__(self, hosts: Sequence[str] = ("hosts",)) -> None:
        super().__init__()
        if isinstance(hosts, str):
            raise TypeError(
                f"LocalJob(hosts=...) takes a sequence of mesh names, not the string {hosts!r}. "
                f"Use LocalJob(hosts=({hosts!r},))."
            )
        self._names = list(hosts)
        self._init_live()

    def _init_live(self) -> None:
        self._live_proc: subprocess.Popen[bytes] | None = None  # the batch client, if started

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The batch client started by `apply(client_script)` in this process."""
        if self._live_proc is None:
            raise ValueError("no local batch job")
        return self._live_proc

    def can_run(self, spec: JobTrait) -> bool:
        """Always False: a local job is cheap to recreate."""
        return False

    def _create(self, client_script: str | None) -> None:
        if client_script is not None:
            pid = launch_batch_client(self, client_script)
            self._live_proc = child(pid)

    def _state(self) -> JobState:
        from monarch._src.hosts.local import this_host

        host = this_host()
        return JobState({name: host for name in self._names})

    def _kill(self) -> None:
        pass


class BatchJob(JobTrait):
    """Wraps the job that a batch client script runs in; that script's `state()` reuses it.

    Inside the batch client (`MONARCH_BATCH_JOB` set) `can_run` is True for any spec, and the
    wrapped job is killed when the script exits.
    """

    def __init__(self, job: JobTrait) -> None:
        super().__init__()
        self._job = job
        self._status = "running"
        self._apply_id = job.apply_id
        self._kill_registered = False

    def can_run(self, spec: JobTrait) -> bool:
        """True inside the batch client (which then owns the job), False elsewhere."""
        if not os.environ.get("MONARCH_BATCH_JOB"):
            return False
        if not self._kill_registered:
            self._kill_registered = True
            atexit.register(self.kill)
        return True

    def _create(self, client_script: str | None) -> None:
        self._job.apply(client_script)

    def _state(self) -> JobState:
        return self._job._state()

    def _kill(self) -> None:
        # The wrapped job was cached before its apply() finished, so it reads "not running"
        # here; its hosts run all the same.
        self._job.kill()


def check_client_script(client_script: str) -> None:
    """Raise unless `client_script` names a file (checked before a job starts anything)."""
    if not isinstance(client_script, (str, os.PathLike)):
        raise TypeError(f"apply(client_script=...) takes the path of a Python script, got "
                        f"{type(client_script).__name__}.")
    if not os.path.isfile(client_script):
        raise FileNotFoundError(f"Batch client script {client_script!r} does not exist.")


def launch_batch_client(job: JobTrait, client_script: str, path: str = DEFAULT_JOB_PATH,
                        supervise: bool = False) -> int:
    """Cache `job` as a batch job at `path` and start `client_script` detached; returns its pid.

    With `supervise`, the script runs under `batch_runner`, which kills the job when the script
    exits (for jobs whose hosts must not outlive their client).
    """
    check_client_script(client_script)
    batch = BatchJob(job)
    batch.dump(path)
    log_dir = os.path.join(os.path.dirname(os.path.realpath(path)), "logs")
    os.makedirs(log_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    env = dict(os.environ, MONARCH_BATCH_JOB="1")
    argv = [sys.executable, client_script]
    if supervise:
        argv = [sys.executable, "-m", "monarch._src.job.batch_runner", os.path.realpath(path),
                client_script]
        env.pop("MONARCH_BATCH_JOB")  # the runner sets it for the script alone
    with open(os.path.join(log_dir, f"job_{stamp}.out"), "ab") as out, \
            open(os.path.join(log_dir, f"job_{stamp}.err"), "ab") as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
            start_new_session=True,
        )
    remember(proc)
    return proc.pid
