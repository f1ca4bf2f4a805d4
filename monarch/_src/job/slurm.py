"""`SlurmJob`: one Slurm allocation whose tasks are monarch worker hosts.

`apply()` submits a batch script with `sbatch`: `srun` starts `ntasks_per_node` workers on each
node, task `i` of a node listening on `tcp://<node>:<monarch_port + i>`. `state()` waits until
`squeue --json` reports the job running and names its nodes, and attaches with
`attach_to_workers`; nodes are handed to the meshes in order. Each worker is given as a target
that resolves once the worker listens (failing early if the job ends), so a slow worker start
is waited for within `host_spawn_ready_timeout`. `kill()` is `scancel`.

Batch mode (`apply(client_script)`): the script's body is `_slurm_batch`, which starts the
workers, runs the client inside the allocation with `MONARCH_BATCH_JOB=1` and ends the workers
when it exits. The client's `job.state()` finds the job cached as a `BatchJob` and takes the
job id from `$SLURM_JOB_ID`; its `kill()` does not `scancel` (the runner ends the allocation).

Out of the cluster (`out_of_cluster=True`, or `attach_to="tcp://node:port"`, Monarch PR #4653):
`state()` bootstraps the client through the first worker of the allocation (or the named one)
with `attach(addr)` before attaching the hosts, so it must be the client's first monarch call.
As `hosts/gateway.py` says, the workers' procs still dial the client's own address: it must be
reachable from the compute nodes.

Slurm's commands run through `subprocess.run` of this module (tests replace it).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from monarch._src.hosts.addresses import parse_worker_address
from monarch._src.hosts.remote import attach_to_workers
from monarch._src.job._slurm_batch import in_batch_job, worker_bootstrap
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
# Seconds between two `squeue` polls while the job is pending.
_POLL_INTERVAL = 0.5
# States after which a job no longer runs (squeue keeps finished jobs for a while).
_ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "DEADLINE", "FAILED",
                    "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "GONE"})


class SlurmJob(JobTrait):
    """Host meshes from one Slurm allocation: `SlurmJob({"trainers": 4}, partition="gpu")`.

    Each mesh gets `count` hosts; with `ntasks_per_node > 1` every node is that many hosts (one
    worker per task, consecutive ports), so `{"trainers": 2}` with `ntasks_per_node=2` fits one
    node. `slurm_args` are extra `#SBATCH` options. `out_of_cluster=True`: `state()` first
    bootstraps the client through the first worker (`attach`, `hosts/gateway.py`);
    `attach_to="tcp://node:port"` names that worker instead. `attach_to` given a Slurm job id
    reuses that running job instead of submitting.
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
        # attach_to: Monarch's gateway address ("tcp://node:port", a worker the client can
        # reach), or here also the id of a running Slurm job to reuse instead of submitting.
        gateway = attach_to if isinstance(attach_to, str) and "://" in attach_to else None
        if gateway is not None:
            parse_worker_address(gateway, what="SlurmJob(attach_to=...)")
            attach_to = None
        self._out_of_cluster = bool(out_of_cluster)
        self._gateway = gateway  # the worker address the client bootstraps through, if given
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
        # The Slurm job id once submitted (or given by attach_to).
        self._slurm_job_id: str | None = str(attach_to) if attach_to is not None else None
        self._attached = attach_to is not None
        self._init_live()

    # Class defaults: a job pickled before these existed reads them.
    _out_of_cluster = False  # the client bootstraps through the first worker (attach)
    _gateway: str | None = None  # attach_to's worker address, through which it bootstraps

    def _init_live(self) -> None:
        self._live_hosts: dict[str, Any] = {}  # HostMeshes attached in this process

    # -- Slurm's commands --------------------------------------------------------------------

    def _slurm(self, argv: list[str]) -> str:
        """Run one Slurm command and return its stdout; a failure names the command."""
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=_COMMAND_TIMEOUT, check=False)
        except FileNotFoundError:
            raise RuntimeError(
                f"SlurmJob cannot run {argv[0]!r}: Slurm's commands are not on PATH here. Run "
                "the client on a Slurm login node."
            ) from None
        if done.returncode != 0:
            raise RuntimeError(
                f"SlurmJob: {' '.join(argv)} failed with status {done.returncode}: "
                f"{(done.stderr or '').strip()}"
            )
        return str(done.stdout)

    def _submit_slurm_job(self, num_nodes: int, client_script: str | None = None) -> str:
        """Submit the batch script for `num_nodes` nodes (running the client command line
        `client_script` in batch mode); returns the job id."""
        os.makedirs(self._logs(), exist_ok=True)
        script = self._script(num_nodes, client_script)
        try:
            done = subprocess.run(["sbatch"], input=script, capture_output=True, text=True,
                                  check=True, timeout=_COMMAND_TIMEOUT)
        except FileNotFoundError:
            raise RuntimeError(
                "Failed to submit SLURM job: sbatch is not on PATH here. Run the client on a "
                "Slurm login node."
            ) from None
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(
                f"Failed to submit SLURM job (sbatch exited {exc.returncode}): "
                f"{(exc.stderr or '').strip()}"
            ) from exc
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"Failed to submit SLURM job: sbatch did not answer within {_COMMAND_TIMEOUT:g}s."
            ) from None
        for line in str(done.stdout).splitlines():
            words = line.split()
            if line.startswith("Submitted batch job") and words[-1].isdigit():
                return words[-1]
        raise RuntimeError(
            f"SlurmJob could not parse job ID from sbatch's output {done.stdout!r} (expected "
            "'Submitted batch job <id>')."
        )

    def _get_job_info_json(self, job_id: str) -> dict[str, Any] | None:
        """squeue's record of the job (`squeue --json`), None once Slurm forgot it.

        The fields read (`job_state`, the node names) differ between Slurm releases;
        `_job_state_of` and `_node_names` read every form."""
        try:
            out = self._slurm(["squeue", "--job", job_id, "--json"])
        except RuntimeError as exc:
            if "Invalid job id" in str(exc):
                return None
            raise
        jobs = json.loads(out).get("jobs", []) if out.strip() else []
        if any("job_id" in j for j in jobs):  # some releases list every job, whatever --job
            jobs = [j for j in jobs if str(j.get("job_id")) == job_id]
        return dict(jobs[0]) if jobs else None

    @staticmethod
    def _job_state_of(info: dict[str, Any] | None) -> str:
        """RUNNING, PENDING, ... of a job record (`GONE` for None)."""
        if info is None:
            return "GONE"
        state = info.get("job_state", "")
        if isinstance(state, list):  # Slurm 23.02 and later: a list of flags, the state first
            return str(state[0]) if state else ""
        return str(state)

    def _node_names(self, info: dict[str, Any]) -> list[str]:
        """The allocation's node names, in Slurm's order."""
        resources = info.get("job_resources") or {}
        nodes = resources.get("nodes")
        if isinstance(nodes, dict) and nodes.get("allocation"):  # Slurm 24.05 and later
            return [str(n["name"]) for n in nodes["allocation"]]
        if resources.get("allocated_nodes"):  # Slurm 20.11 to 23.11
            return [str(n["nodename"]) for n in resources["allocated_nodes"]]
        nodelist = nodes if isinstance(nodes, str) else info.get("nodes", "")
        return self._slurm(["scontrol", "show", "hostnames", str(nodelist)]).split()

    def _job_state(self, job_id: str | None = None) -> str:
        """The job's Slurm state (`GONE` once Slurm forgot it)."""
        return self._job_state_of(self._get_job_info_json(job_id or self._require_id()))

    # -- spec ---------------------------------------------------------------------------------

    def add_mesh(self, name: str, num_nodes: int) -> None:
        """Ask for one more mesh of `num_nodes` hosts (before `apply()`)."""
        if self._slurm_job_id is not None:
            raise RuntimeError(
                f"SlurmJob.add_mesh({name!r}) after the job was submitted (job "
                f"{self._slurm_job_id}); kill() it and apply() again with the new mesh."
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
        return self._slurm_job_id

    def _logs(self) -> str:
        return self._log_dir or os.path.join(tempfile.gettempdir(), "monarch_slurm")

    def _client_command(self, client_script: str, check: bool) -> str:
        """The batch client's command line: a Python script's path (one word ending in `.py`)
        runs with `python_exe`; anything else is a command line run as given (torchmonarch's
        form, e.g. `python -m my.train --lr 1`). With `check`, a script must exist."""
        if not isinstance(client_script, (str, os.PathLike)):
            raise TypeError("apply(client_script=...) takes a script path or a command line, "
                            f"got {type(client_script).__name__}.")
        words = shlex.split(os.fspath(client_script))
        if not words:
            raise ValueError("apply(client_script=...) is empty: give a script path or a "
                             "command line such as 'python -m my.train'.")
        if len(words) == 1 and words[0].endswith(".py"):
            if check:
                check_client_script(words[0])
            return shlex.join([self._python_exe, os.path.abspath(words[0])])
        return os.fspath(client_script)

    def sbatch_script(self, client_script: str | None = None) -> str:
        """The batch script `apply()` submits; with `client_script` (a script path or a command
        line), the batch-mode script that runs it inside the allocation."""
        command = None if client_script is None else self._client_command(client_script, False)
        return self._script(self.nodes, command)

    def _script(self, num_nodes: int, client_command: str | None) -> str:
        log_dir = self._logs()
        opts = [
            f"--job-name={self._job_name}",
            f"--nodes={num_nodes}",
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
        python = shlex.quote(self._python_exe)
        lines = ["#!/bin/bash", *(f"#SBATCH {o}" for o in opts),
                 f"mkdir -p {shlex.quote(log_dir)}"]
        if client_command is None:  # workers only; clients attach from outside
            bootstrap = worker_bootstrap(self._port, self._bind_to)
            lines.append(f"srun --kill-on-bad-exit=0 {python} -c {shlex.quote(bootstrap)}")
        else:  # batch mode: the runner starts the workers, runs the client, ends the workers
            bind = f" --bind-to {shlex.quote(self._bind_to)}" if self._bind_to else ""
            lines.append(f"exec {python} -m monarch._src.job._slurm_batch --port {self._port}"
                         f"{bind} {shlex.quote(client_command)}")
        return "\n".join(lines) + "\n"

    # -- JobTrait ----------------------------------------------------------------------------

    def can_run(self, spec: JobTrait) -> bool:
        """True if `spec` asks for the same allocation and this job still runs."""
        if not isinstance(spec, SlurmJob):
            return False
        if spec.sbatch_script() != self.sbatch_script() or spec._meshes != self._meshes:
            return False
        if (spec._out_of_cluster, spec._gateway) != (self._out_of_cluster, self._gateway):
            return False
        try:
            return self._jobs_active()
        except RuntimeError:
            return False

    def _create(self, client_script: str | None) -> None:
        command = None
        if client_script is not None:
            command = self._client_command(client_script, True)
            if self._attached:
                raise ValueError(
                    "SlurmJob(attach_to=...) cannot run a batch client: the allocation already "
                    "runs. Start the client yourself; its job.state() attaches."
                )
            # Cached before the submission: the client takes the id from $SLURM_JOB_ID.
            BatchJob(self).dump(DEFAULT_JOB_PATH)
        if self._attached:
            return
        self._slurm_job_id = self._submit_slurm_job(self.nodes, command)

    def _resolved_job_id(self) -> str | None:
        """The submitted (or attached) job id; in the batch client, whose cached job was dumped
        before the submission, `$SLURM_JOB_ID`. An external client inside some other
        allocation never takes that allocation's id."""
        if self._slurm_job_id is not None:
            return self._slurm_job_id
        return os.environ.get("SLURM_JOB_ID") if _in_batch_client() else None

    def _require_id(self) -> str:
        job_id = self._resolved_job_id()
        if job_id is None:
            raise RuntimeError("SlurmJob has not been submitted yet. Call apply() or state().")
        return job_id

    def _jobs_active(self) -> bool:
        """Whether the allocation still runs (or waits to), as squeue reports it. The batch
        client's job was cached before it was marked running, so there only squeue counts."""
        if not self.active and not _in_batch_client():
            return False
        job_id = self._resolved_job_id()
        if job_id is None:
            return False
        return self._job_state_of(self._get_job_info_json(job_id)) not in _ENDED

    def _wait_for_job_start(self, job_id: str) -> list[str]:
        """Wait until the job runs (within `job_start_timeout`); returns its node names."""
        with Progress(f"Slurm job {job_id}", 1) as progress:
            deadline = time.monotonic() + self._start_timeout
            while True:
                info = self._get_job_info_json(job_id)
                state = self._job_state_of(info)
                if state == "RUNNING" and info is not None:
                    break
                progress.update(0, state.lower())
                if state in _ENDED:
                    raise RuntimeError(
                        f"Slurm job {job_id} ended ({state}) before its workers came up. "
                        f"See slurm-{job_id}.out in {self._logs()}."
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"Slurm job {job_id} was still {state} after {self._start_timeout:.0f}s "
                        "(job_start_timeout). Check `squeue` for why it waits."
                    )
                time.sleep(_POLL_INTERVAL)
            nodes = self._node_names(info)
            progress.close(detail="running")
        if len(nodes) != self.nodes:
            raise RuntimeError(
                f"Slurm job {job_id} runs on {len(nodes)} nodes, the job asks for {self.nodes}: "
                "a partial allocation cannot hold the meshes."
            )
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
            job_id = self._require_id()
            nodes = self._wait_for_job_start(job_id)
            _use_tcp()
            addresses = self.worker_addresses([self._resolve(n) for n in nodes])
            gateway = self._gateway or (addresses[0] if self._out_of_cluster else None)
            try:
                self._attach_client(gateway)
            except RuntimeError as exc:
                raise RuntimeError(
                    f"SlurmJob(out_of_cluster=True or attach_to=...) bootstraps the client "
                    f"through the worker at {gateway}, which must come before any other monarch "
                    f"call of this process: call job.state() first. {exc}"
                ) from exc
            start = 0
            for name, count in self._meshes.items():
                workers = [_WorkerListening(a, self, job_id)
                           for a in addresses[start:start + count]]
                self._live_hosts[name] = attach_to_workers(
                    name=name, ca="trust_all_connections", workers=workers)
                start += count
        return JobState(dict(self._live_hosts))

    def _kill(self) -> None:
        shutdown_quietly(self._live_hosts.values())
        self._live_hosts = {}
        if _in_batch_client():
            return  # the allocation's runner ends the workers once the client exits
        job_id = self._resolved_job_id()
        if job_id is None:
            return
        try:
            self._slurm(["scancel", job_id])
        except RuntimeError:
            if self._job_state(job_id) not in _ENDED:
                raise
        if not self._attached:
            self._slurm_job_id = None


class _WorkerListening:
    """A worker of the job as `attach_to_workers` takes a future: `get()` returns its address
    once something listens there, and fails as soon as the Slurm job stops running."""

    def __init__(self, address: str, job: SlurmJob, job_id: str) -> None:
        self.address = address
        self._job = job
        self._job_id = job_id

    def get(self, timeout: float | None = None) -> str:
        host, port = self.address[len("tcp://"):].rsplit(":", 1)
        limit = timeout if timeout is not None else self._job._start_timeout
        deadline = time.monotonic() + limit
        next_check = time.monotonic() + 1.0
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=1.0):
                    return self.address
            except OSError:
                pass  # not listening yet: tried again below until the deadline
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 1.0
                state = self._job._job_state(self._job_id)
                if state != "RUNNING":
                    raise RuntimeError(
                        f"Slurm job {self._job_id} is {state}: its worker {self.address} never "
                        "listened."
                    )
            if now > deadline:
                raise TimeoutError(
                    f"Worker {self.address} of Slurm job {self._job_id} did not listen within "
                    f"{limit:g}s.")
            time.sleep(0.1)

    def __repr__(self) -> str:
        return f"<worker {self.address} of Slurm job {self._job_id}>"


def _in_batch_client() -> bool:
    """True in a batch client started by `apply(client_script)` inside the allocation."""
    return in_batch_job() and "SLURM_JOB_ID" in os.environ


def _use_tcp() -> None:
    """Make this client listen on a routable TCP address, unless monarch already started."""
    from monarch._src.config import configure, parse_transport
    from monarch._src.lowlevel import runtime_if_started

    if runtime_if_started() is None:  # what monarch.actor.enable_transport("tcp") does then
        configure(default_transport=parse_transport("tcp"))
