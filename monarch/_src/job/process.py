"""`ProcessJob`: each host is a local worker process; the multi-"host" job of one machine.

Each worker runs `run_worker_loop_forever` on its own `tcp://127.0.0.1:<port>` address where
Monarch's listens on `ipc://<tmpdir>/<mesh>_<i>`. Both are worker addresses here; loopback TCP
is kept because its procs then listen on TCP too, whatever the client's transport, as every
other job's do (a subclass may start its workers on `ipc://` paths, as Monarch's tests'
`DuplexProcessJob` does, and attach works the same). Workers are started in their own
sessions so they outlive the process that applied the job (`monarch apply`, then `monarch exec`
from another shell); the pickled job keeps their pids and addresses (`_host_to_pid`, keyed
`<mesh>_<i>` as on Monarch, so a subclass's `_create` may start the workers its own way), and
`can_run` checks that they are still the same processes.

Each `state()` attaches anew, as Monarch's does: two states of one job are two host meshes over
the same workers, and stopping one stops only its own procs.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from monarch._src.hosts.addresses import free_port
from monarch._src.job.blocking import shutdown_quietly
from monarch._src.job.job import JobTrait
from monarch._src.job.local import check_client_script, launch_batch_client
from monarch._src.job.login import ProcessState
from monarch._src.job.pids import alive, kill_workers, spawn_detached, wait_listening
from monarch._src.job.state import JobState
from monarch._src.lowlevel import Progress

__all__ = ["ProcessJob", "check_meshes"]

# Bound on one worker coming up (interpreter start and imports on a busy machine).
_START_TIMEOUT = 60.0
# Tries per worker (each with a fresh port) before apply() gives up.
_START_ATTEMPTS = 3


def check_meshes(owner: str, meshes: Any) -> dict[str, int]:
    """Validate a `{mesh name: host count}` mapping; errors name `owner` and the bad entry."""
    if not isinstance(meshes, dict) or not meshes:
        raise TypeError(
            f"{owner}(meshes=...) takes a non-empty dict of mesh name to host count, e.g. "
            f"{{'trainers': 2}}; got {meshes!r}."
        )
    for name, count in meshes.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"{owner} mesh name {name!r} must be a Python identifier (it becomes an "
                "attribute of the job state)."
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{owner} mesh {name!r} needs a positive host count, got {count!r}.")
    return dict(meshes)


class ProcessJob(JobTrait):
    """Hosts as local worker processes: `ProcessJob({"trainers": 2, "ps": 1})`.

    `env` is added to the workers' environment. Batch mode: `apply("client.py")` starts the
    workers, then runs the script detached (`MONARCH_BATCH_JOB=1`, output under
    `.monarch/logs/`); the script's own `job.state()` reuses these workers, and they are killed
    when the script exits (`batch_pid` is the supervising process). torchmonarch 0.7.0's
    ProcessJob refuses batch mode.
    """

    def __init__(self, meshes: dict[str, int], env: dict[str, str] | None = None) -> None:
        super().__init__()
        self._meshes = check_meshes("ProcessJob", meshes)
        self._env = dict(env or {})
        # "<mesh>_<i>" -> the worker of host i of that mesh, filled by _create; empty while not
        # running.
        self._host_to_pid: dict[str, ProcessState] = {}
        self._log_dir: str | None = None  # where worker stdout/stderr go
        self.batch_pid: int | None = None  # the batch client's supervisor, in batch mode
        self._init_live()

    def _init_live(self) -> None:
        self._live_hosts: list[Any] = []  # every HostMesh state() attached in this process

    @property
    def log_dir(self) -> str | None:
        """The directory holding each worker's log (None before `apply`)."""
        return self._log_dir

    def can_run(self, spec: JobTrait) -> bool:
        """True if `spec` asks for the same meshes and every worker still runs."""
        return (
            isinstance(spec, ProcessJob)
            and spec._meshes == self._meshes
            and spec._env == self._env
            and bool(self._host_to_pid)
            and all(alive(pid, addr) for pid, addr in self._host_to_pid.values())
        )

    def _create(self, client_script: str | None) -> None:
        if client_script is not None:
            check_client_script(client_script)
        self._log_dir = tempfile.mkdtemp(prefix="monarch_job_")
        env = dict(os.environ, **self._env)
        total = sum(self._meshes.values())
        progress = Progress("starting worker hosts", total)
        slots = [(name, i) for name, count in self._meshes.items() for i in range(count)]
        started: list[tuple[int, str]] = []
        try:
            pending = [(slot, self._start_worker(*slot, env)) for slot in slots]
            started = [w for _, w in pending]
            ready: dict[tuple[str, int], tuple[int, str]] = {}
            for slot, worker in pending:
                for attempt in range(_START_ATTEMPTS):
                    pid, address = worker
                    try:
                        wait_listening("127.0.0.1", int(address.rsplit(":", 1)[1]), pid,
                                       address, _START_TIMEOUT)
                        break
                    except RuntimeError:
                        # Exited before listening: most often another program took the free
                        # port between our pick and the worker's bind. Try another port.
                        if attempt + 1 == _START_ATTEMPTS:
                            raise
                        worker = self._start_worker(*slot, env)
                        started.append(worker)
                ready[slot] = worker
                progress.update(len(ready))
            for name, i in slots:
                self._host_to_pid[f"{name}_{i}"] = ProcessState(*ready[(name, i)])
            progress.close(detail=f"worker hosts up (logs in {self._log_dir})")
            if client_script is not None:
                self.batch_pid = launch_batch_client(self, client_script, supervise=True)
        except BaseException as exc:
            progress.close(exc)
            kill_workers(started)
            self._host_to_pid = {}
            raise

    def _start_worker(self, name: str, index: int, env: dict[str, str]) -> tuple[int, str]:
        assert self._log_dir is not None
        address = f"tcp://127.0.0.1:{free_port('127.0.0.1')}"
        pid = spawn_detached([sys.executable, "-m", "monarch._src.job.worker_main", address],
                             os.path.join(self._log_dir, f"{name}_{index}.log"), env)
        return pid, address

    def _state(self) -> JobState:
        from monarch._src.job.attach import attach_job_workers

        hosts = {}
        for name, count in self._meshes.items():
            addresses = [self._host_to_pid[f"{name}_{i}"].channel for i in range(count)]
            hosts[name] = attach_job_workers(addresses, name)
            self._live_hosts.append(hosts[name])
        return JobState(hosts)

    def _kill(self) -> None:
        shutdown_quietly(self._live_hosts)
        self._live_hosts = []
        kill_workers(list(self._host_to_pid.values()))
        self._host_to_pid = {}
