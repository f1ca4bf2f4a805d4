"""SlurmJob against a real one-node Slurm (munged, slurmctld, slurmd) started by the test."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from monarch.actor import Actor, endpoint
from monarch.job import SlurmJob
from tests.job.slurm_cluster import SlurmCluster, unavailable_reason

TIMEOUT = 60.0


class Host(Actor):
    @endpoint
    def where(self) -> tuple[str, str]:
        return socket.gethostname(), os.environ.get("SLURM_JOB_ID", "")


def _two_free_ports() -> int:
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            base = a.getsockname()[1]
            try:
                with socket.socket() as b:
                    b.bind(("127.0.0.1", base + 1))
                    return int(base)
            except OSError:
                continue
    raise RuntimeError("no two consecutive free ports")


def test_sbatch_script_carries_the_contract_options() -> None:
    job = SlurmJob({"trainers": 3, "ps": 1}, python_exe="/opt/py/bin/python",
                   slurm_args=["--constraint=a100"], monarch_port=30000, ntasks_per_node=2,
                   time_limit="01:00:00", partition="gpu", log_dir="/logs", gpus_per_node=8,
                   cpus_per_task=4, mem="64G", account="acct", qos="high")
    script = job.sbatch_script()
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2", "#SBATCH --time=01:00:00",
                 "#SBATCH --partition=gpu", "#SBATCH --exclusive", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --cpus-per-task=4", "#SBATCH --mem=64G", "#SBATCH --account=acct",
                 "#SBATCH --qos=high", "#SBATCH --constraint=a100",
                 "#SBATCH --output=/logs/slurm-%j.out"):
        assert line in script.splitlines(), line
    assert "/opt/py/bin/python -m monarch._src.job.worker_main" in script
    assert "$((30000 + SLURM_LOCALID))" in script
    assert job.worker_addresses(["n1", "n2"]) == [
        "tcp://n1:30000", "tcp://n1:30001", "tcp://n2:30000", "tcp://n2:30001"]


def test_slurm_job_bad_arguments_are_clear() -> None:
    with pytest.raises(NotImplementedError, match="login node"):
        SlurmJob({"a": 1}, out_of_cluster=True)
    with pytest.raises(TypeError, match="not a string"):
        SlurmJob({"a": 1}, slurm_args="--qos=x")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no real Slurm here: {reason}")
    cluster = SlurmCluster(str(tmp_path_factory.mktemp("slurm")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.timeout(120)
def test_slurm_job_runs_workers_in_the_allocation(slurm, tmp_path, monkeypatch) -> None:
    from monarch.actor import context

    # Start the runtime first, so the result does not depend on test order: SlurmJob would
    # otherwise switch a fresh client to a routable TCP address for the rest of the session.
    context()
    monkeypatch.setenv("SLURM_CONF", slurm.conf)
    monkeypatch.chdir(tmp_path)
    job = SlurmJob({"workers": 2}, python_exe=sys.executable, ntasks_per_node=2,
                   exclusive=False, log_dir=str(tmp_path / "logs"),
                   monarch_port=_two_free_ports(), job_start_timeout=60)
    state = job.state()
    try:
        assert job.job_id is not None and state.workers.sizes == {"hosts": 2}
        procs = state.workers.spawn_procs(per_host={"gpus": 1})
        where = procs.spawn("host", Host).where.call().get(timeout=TIMEOUT)
        assert {w for _, w in where.items()} == {(slurm.node, job.job_id)}
        procs.stop().get(timeout=TIMEOUT)
        assert job.can_run(SlurmJob({"workers": 2}, python_exe=sys.executable,
                                    ntasks_per_node=2, exclusive=False,
                                    log_dir=str(tmp_path / "logs"),
                                    monarch_port=job._port, job_start_timeout=60))
    finally:
        job.kill()
    assert job._job_state() in ("GONE", "CANCELLED", "COMPLETING")
