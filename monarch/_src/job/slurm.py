"""`SlurmJob`: one Slurm allocation whose tasks are monarch worker hosts.

`apply()` submits a batch script with `sbatch`: `srun` starts `ntasks_per_node` workers on each
node, task `i` of a node listening on `tcp://<node>:<monarch_port + i>`. `state()` waits until
`squeue` reports the job running, expands its node list with `scontrol show hostnames`, waits
for the workers to listen and attaches with `attach_to_workers`; nodes are handed to the meshes
in order. `kill()` is `scancel`. Batch mode (`apply("client.py")`) runs the client inside the
allocation too (see `_create`). The Slurm commands go through `SlurmJob._slurm` so tests can
see exactly what runs.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from monarch._src.job.blocking import shutdown_quietly
from monarch._src.job.job import DEFAULT_JOB_PATH, JobTrait
from monarch._src.job.local import BatchJob, check_client_script
from monarch._src.job.process import check_meshes
from monarch._src.job.state import JobState
from monarch._src.lowlevel import Progress

__all__ = ["SlurmJob"]

# Default bound on the allocation starting when `job_start_timeout` is None.
_DEFAULT_START_TIMEOUT = 600.0
# Bound on each Slurm command.
_COMMAND_TIMEOUT = 60.0


class SlurmJob(JobTrait):
    """Host meshes from one Slurm allocation: `SlurmJob({"trainers": 4}, partition="gpu")`.

    Each mesh gets `count` nodes; with `ntasks_per_node > 1` every node is that many hosts (one
    worker per task, consecutive ports), so `{"trainers": 2}` with `ntasks_per_node=2` fits one
    node. `slurm_args` are extra `#SBATCH` options; `attach_to` reuses a running Slurm job id
    instead of submitting.
    """

    def __init__(
        self,
        meshes: dict[str, int],
        python_exe: str = "python",
        slurm_args: Sequence[str] = (),
        monarch_port: int = 22222,
        job_name: str = "monarch_job",
        ntasks_per_node: int = 1,
        time_limit: str | None = None,
        partition: str | None = None,
        log_dir: str | None = None,
        exclusive: bool = True,
        gpus_per_node: int | None = None,
        cpus_per_task: int | None = None,
        mem: str | None = None,
        job_start_timeout: float | None = None,
        account: str | None = None,
        qos: str | None = None,
        out_of_cluster: bool = False,
        attach_to: str | int | None = None,
        bind_to: str | None = None,
    ) -> None:
        super().__init__()
        self._meshes = check_meshes("SlurmJob", meshes)
        if out_of_cluster:
            raise NotImplementedError(
                "SlurmJob(out_of_cluster=True) is not available: the client must run where it "
                "can reach the compute nodes (a login node)."
            )
        if ntasks_per_node < 1:
            raise ValueError(f"SlurmJob ntasks_per_node must be >= 1, got {ntasks_per_node}.")
        if isinstance(slurm_args, str):
            raise TypeError("SlurmJob slurm_args takes a sequence of options, not a string.")
        try:
            self._bind_to = str(ipaddress.ip_address(bind_to)) if bind_to is not None else None
        except ValueError:
            raise ValueError("bind_to must be an IPv4 or IPv6 address without a port") from None
        self._python_exe = python_exe
        self._slurm_args = list(slurm_args)
        self._port = monarch_port
        self._job_name = job_name
        self._ntasks = ntasks_per_node
        self._time_limit = time_limit
        self._partition = partition
        self._log_dir = log_dir
        self._exclusive = exclusive
        self._gpus = gpus_per_node
        self._cpus = cpus_per_task
        self._mem = mem
        self._start_timeout = job_start_timeout or _DEFAULT_START_TIMEOUT
        self._account = account
        self._qos = qos
        self._job_id: str | None = str(attach_to) if attach_to is not None else None
        self._attached = attach_to is not None
        self._init_live()

    def _init_live(self) -> None:
        self._live_hosts: dict[str, Any] = {}  # HostMeshes attached in this process

    # -- the seam to Slurm -----------------------------------------------------------------------

    def _slurm(self, argv: list[str], stdin: str | None = None) -> str:
        """Run one Slurm command and return its stdout; a failure names the command."""
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                                  timeout=_COMMAND_TIMEOUT, check=False)
        except FileNotFoundError:
            raise RuntimeError(
                f"SlurmJob cannot run {argv[0]!r}: Slurm's commands are not on PATH here. Run "
                "the client on a Slurm login node."
            ) from None
        if done.returncode != 0:
            raise RuntimeError(
                f"SlurmJob: {' '.join(argv)} failed with status {done.returncode}: "
                f"{done.stderr.strip()}"
            )
        return done.stdout

    # -- spec -------------------------------------------------------------------------------------

    def add_mesh(self, name: str, num_nodes: int) -> None:
        """Ask for one more mesh of `num_nodes` hosts (before `apply()`)."""
        if self._job_id is not None:
            raise RuntimeError(
                f"SlurmJob.add_mesh({name!r}) after the job was submitted (job {self._job_id}); "
                "kill() it and apply() again with the new mesh."
            )
        self._meshes.update(check_meshes("SlurmJob", {name: num_nodes}))

    def share_node(self, tasks_per_node: int, gpus_per_task: int, partition: str) -> None:
        """Share nodes with other jobs, sized by the `clusterscope` package (as torchmonarch)."""
        try:
            import clusterscope  # type: ignore[import-not-found]
        except ImportError:
            raise RuntimeError(
                "please install clusterscope to use share_node. `pip install clusterscope`"
            ) from None
        args = clusterscope.job_gen_task_slurm(
            partition=partition, gpus_per_task=gpus_per_task, tasks_per_node=tasks_per_node)
        self._exclusive = False
        self._cpus = args["cpus_per_task"]
        self._mem = args["memory"]

    @property
    def nodes(self) -> int:
        """How many nodes the allocation asks for."""
        hosts = sum(self._meshes.values())
        return -(-hosts // self._ntasks)

    @property
    def job_id(self) -> str | None:
        """The Slurm job id once submitted (or the one attached to)."""
        return self._job_id

    def _logs(self) -> str:
        return self._log_dir or os.path.join(tempfile.gettempdir(), "monarch_slurm")

    def sbatch_script(self, client_script: str | None = None) -> str:
        """The batch script `apply()` submits; with `client_script`, the batch-mode script that
        also runs the client on the first node (see `_create`)."""
        log_dir = self._logs()
        opts = [
            f"--job-name={self._job_name}",
            f"--nodes={self.nodes}",
            f"--ntasks-per-node={self._ntasks}",
            f"--output={os.path.join(log_dir, 'slurm-%j.out')}",
        ]
        if self._time_limit:
            opts.append(f"--time={self._time_limit}")
        if self._partition:
            opts.append(f"--partition={self._partition}")
        if self._exclusive:
            opts.append("--exclusive")
        if self._gpus is not None:
            opts.append(f"--gpus-per-node={self._gpus}")
        if self._cpus is not None:
            opts.append(f"--cpus-per-task={self._cpus}")
        if self._mem:
            opts.append(f"--mem={self._mem}")
        if self._account:
            opts.append(f"--account={self._account}")
        if self._qos:
            opts.append(f"--qos={self._qos}")
        opts.extend(self._slurm_args)
        listen = "$(hostname)"
        if self._bind_to is not None:  # listen there; clients still dial the node's name
            listen = f"[{self._bind_to}]" if ":" in self._bind_to else self._bind_to
        worker = (
            f"exec {shlex.quote(self._python_exe)} -m monarch._src.job.worker_main "
            f"tcp://{listen}:$(({self._port} + SLURM_LOCALID))"
        )
        lines = ["#!/bin/bash", *(f"#SBATCH {o}" for o in opts)]
        lines.append(f"mkdir -p {shlex.quote(log_dir)}")
        srun = f"srun --kill-on-bad-exit=0 bash -c {shlex.quote(worker)}"
        if client_script is None:
            lines.append(srun)
        else:
            client = shlex.quote(os.path.abspath(client_script))
            lines += [
                f"{srun} &",
                "monarch_workers=$!",
                f"MONARCH_BATCH_JOB=1 {shlex.quote(self._python_exe)} {client}",
                "status=$?",
                "kill $monarch_workers 2>/dev/null",
                "wait $monarch_workers 2>/dev/null",
                "exit $status",
            ]
        return "\n".join(lines) + "\n"

    # -- JobTrait ----------------------------------------------------------------------------

    def can_run(self, spec: JobTrait) -> bool:
        """True if `spec` asks for the same allocation and this job still runs."""
        if not isinstance(spec, SlurmJob) or self._job_id is None:
            return False
        if spec.sbatch_script() != self.sbatch_script() or spec._meshes != self._meshes:
            return False
        try:
            return self._job_state() in ("RUNNING", "PENDING", "CONFIGURING")
        except RuntimeError:
            return False

    def _create(self, client_script: str | None) -> None:
        if client_script is not None:
            # Batch mode: one allocation runs the workers and, on its first node, the client
            # (MONARCH_BATCH_JOB=1), whose job.state() finds this job cached as a BatchJob and
            # takes the job id from SLURM_JOB_ID. The allocation ends with the client.
            check_client_script(client_script)
            if self._attached:
                raise ValueError(
                    "SlurmJob(attach_to=...) cannot run a batch client: the allocation already "
                    "runs. Start the client yourself; its job.state() attaches."
                )
            BatchJob(self).dump(DEFAULT_JOB_PATH)
        if self._attached:
            return
        if self._log_dir:
            os.makedirs(self._log_dir, exist_ok=True)
        out = self._slurm(["sbatch", "--parsable"], stdin=self.sbatch_script(client_script))
        self._job_id = out.strip().split(";")[0]

    def _job_state(self) -> str:
        job_id = self._require_id()
        out = self._slurm(["squeue", "-h", "-j", job_id, "-o", "%T"]).strip()
        return out or "GONE"

    def _require_id(self) -> str:
        if self._job_id is None and _in_batch_client():
            self._job_id = os.environ.get("SLURM_JOB_ID")
        if self._job_id is None:
            raise RuntimeError("SlurmJob has not been submitted yet. Call apply() or state().")
        return self._job_id

    def _wait_running(self) -> list[str]:
        with Progress(f"Slurm job {self._job_id}", 1) as progress:
            deadline = time.monotonic() + self._start_timeout
            while (state := self._job_state()) != "RUNNING":
                progress.update(0, state.lower())
                if state in ("GONE", "FAILED", "CANCELLED", "TIMEOUT", "COMPLETED", "NODE_FAIL"):
                    raise RuntimeError(
                        f"Slurm job {self._job_id} ended ({state}) before its workers came up. "
                        f"See slurm-{self._job_id}.out in {self._logs()}."
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"Slurm job {self._job_id} was still {state} after "
                        f"{self._start_timeout:.0f}s (job_start_timeout). Check `squeue` for "
                        "why it waits."
                    )
                time.sleep(0.2)
            nodelist = self._slurm(["squeue", "-h", "-j", self._require_id(), "-o", "%N"]).strip()
            nodes = self._slurm(["scontrol", "show", "hostnames", nodelist]).split()
            progress.close(detail="running")
        return nodes

    def worker_addresses(self, nodes: list[str]) -> list[str]:
        """The worker address of each host, node-major (node names as given)."""
        return [f"tcp://{n}:{self._port + i}" for n in nodes for i in range(self._ntasks)]

    @staticmethod
    def _resolve(node: str) -> str:
        # The client checks that it can reach a host by its address, so give it the IP the
        # node's name resolves to (the worker binds that same name).
        try:
            return socket.gethostbyname(node)
        except OSError:
            return node

    def _state(self) -> JobState:
        if not self._live_hosts:
            from monarch._src.job.attach import attach_job_workers

            _use_tcp()
            addresses = self.worker_addresses([self._resolve(n) for n in self._wait_running()])
            deadline = time.monotonic() + self._start_timeout
            for addr in addresses:
                host, port = addr[len("tcp://"):].rsplit(":", 1)
                _wait_port(host, int(port), deadline, self)
            start = 0
            for name, count in self._meshes.items():
                self._live_hosts[name] = attach_job_workers(addresses[start:start + count], name)
                start += count
        return JobState(dict(self._live_hosts))

    def _kill(self) -> None:
        shutdown_quietly(self._live_hosts.values())
        self._live_hosts = {}
        if _in_batch_client():
            return  # the allocation's batch script ends the workers once the client exits
        if self._job_id is not None:
            self._slurm(["scancel", self._job_id])


def _in_batch_client() -> bool:
    """True in a batch client started by `apply(client_script)` inside the allocation."""
    return os.environ.get("MONARCH_BATCH_JOB") == "1" and "SLURM_JOB_ID" in os.environ


def _use_tcp() -> None:
    """Make this client listen on a routable TCP address, unless monarch already started."""
    from monarch._src.config import configure, parse_transport
    from monarch._src.lowlevel import runtime_if_started

    if runtime_if_started() is None:  # what monarch.actor.enable_transport("tcp") does then
        configure(default_transport=parse_transport("tcp"))


def _wait_port(host: str, port: int, deadline: float, job: SlurmJob) -> None:
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            pass  # not listening yet: the loop tries again until its deadline
        if job._job_state() != "RUNNING":
            raise RuntimeError(f"Slurm job {job.job_id} stopped before {host}:{port} listened.")
        if time.monotonic() > deadline:
            raise TimeoutError(f"Worker {host}:{port} of Slurm job {job.job_id} never listened.")
        time.sleep(0.1)
