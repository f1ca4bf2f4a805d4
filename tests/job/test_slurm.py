"""SlurmJob against a real one-node Slurm (munged, slurmctld, slurmd) started by the test."""

from __future__ import annotations

import os
import shlex
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
    srun = [line for line in script.splitlines() if line.startswith("srun ")]
    assert len(srun) == 1 and "/opt/py/bin/python -c" in srun[0]
    assert "run_worker_loop_forever" in srun[0] and "30000 + int(os.environ.get" in srun[0]
    assert "MONARCH_BATCH_JOB" not in script and "_slurm_batch" not in script
    assert job.worker_addresses(["n1", "n2"]) == [
        "tcp://n1:30000", "tcp://n1:30001", "tcp://n2:30000", "tcp://n2:30001"]


def test_slurm_job_bad_arguments_are_clear() -> None:
    with pytest.raises(ValueError, match=r"SlurmJob\(attach_to=...\): worker address"):
        SlurmJob({"a": 1}, attach_to="udp://gateway:22222")
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
    job_id = job.job_id
    try:
        assert job_id is not None and state.workers.sizes == {"hosts": 2}
        procs = state.workers.spawn_procs(per_host={"gpus": 1})
        where = procs.spawn("host", Host).where.call().get(timeout=TIMEOUT)
        assert {w for _, w in where.items()} == {(slurm.node, job_id)}
        procs.stop().get(timeout=TIMEOUT)
        assert job.can_run(SlurmJob({"workers": 2}, python_exe=sys.executable,
                                    ntasks_per_node=2, exclusive=False,
                                    log_dir=str(tmp_path / "logs"),
                                    monarch_port=job._port, job_start_timeout=60))
    finally:
        job.kill()
    assert job.job_id is None and not job.active
    assert job._job_state(job_id) in ("GONE", "CANCELLED", "COMPLETING")


def test_batch_sbatch_script_runs_the_client_through_the_runner(tmp_path) -> None:
    job = SlurmJob({"a": 2}, python_exe="/opt/py/bin/python", monarch_port=30000)
    lines = job.sbatch_script(client_script="train.py").splitlines()
    # a script path runs with python_exe; the runner starts and ends the workers
    client = shlex.quote(f"/opt/py/bin/python {os.path.abspath('train.py')}")
    assert lines[-1] == ("exec /opt/py/bin/python -m monarch._src.job._slurm_batch --port 30000 "
                         f"{client}")
    assert not any(line.startswith("srun") for line in lines)
    # anything else is a command line, run as given (torchmonarch's form)
    command = "/opt/py/bin/python -m my.train --lr 0.1"
    assert job.sbatch_script(command).splitlines()[-1].endswith(shlex.quote(command))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SlurmJob({"a": 1}).apply(str(tmp_path / "missing.py"))
    with pytest.raises(ValueError, match="is empty"):
        SlurmJob({"a": 1}).apply("  ")
    with pytest.raises(ValueError, match="cannot run a batch client"):
        SlurmJob({"a": 1}, attach_to=5).apply("python -m x")


SLURM_CLIENT = """\
import os, socket
from monarch.actor import Actor, endpoint
from monarch.job import SlurmJob

class Host(Actor):
    @endpoint
    def where(self):
        return os.environ.get("SLURM_JOB_ID", "")

state = SlurmJob({"workers": 2}).state()   # any spec: the batch client reuses its allocation
procs = state.workers.spawn_procs()
ids = sorted(w for _, w in procs.spawn("host", Host).where.call().get(timeout=60).items())
with open("result.txt", "w") as f:
    f.write(os.environ["SLURM_JOB_ID"] + " " + " ".join(ids))
"""


@pytest.mark.timeout(150)
def test_slurm_job_batch_mode_runs_the_client_inside_the_allocation(slurm, tmp_path,
                                                                    monkeypatch) -> None:
    import time

    monkeypatch.setenv("SLURM_CONF", slurm.conf)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "client.py").write_text(SLURM_CLIENT)
    job = SlurmJob({"workers": 2}, python_exe=sys.executable, ntasks_per_node=2,
                   exclusive=False, log_dir=str(tmp_path / "logs"),
                   monarch_port=_two_free_ports(), job_start_timeout=60)
    job.apply("client.py")
    assert job.job_id is not None
    deadline = time.monotonic() + 120
    while job._job_state() not in ("GONE", "COMPLETED", "FAILED", "CANCELLED"):
        assert time.monotonic() < deadline, "the batch allocation did not end"
        time.sleep(0.2)
    out = (tmp_path / "logs" / f"slurm-{job.job_id}.out")
    assert (tmp_path / "result.txt").exists(), out.read_text() if out.exists() else "no log"
    assert (tmp_path / "result.txt").read_text() == " ".join([job.job_id] * 3)


def test_add_mesh_bind_to_and_share_node() -> None:
    job = SlurmJob({"a": 1}, bind_to="0.0.0.0")
    job.add_mesh("b", 2)
    assert job.nodes == 3 and "#SBATCH --nodes=3" in job.sbatch_script().splitlines()
    assert "tcp://0.0.0.0:{port}" in job.sbatch_script()
    assert "tcp://[::]:{port}" in SlurmJob({"a": 1}, bind_to="::").sbatch_script()
    assert "--bind-to :: " in SlurmJob({"a": 1}, bind_to="::").sbatch_script("train.py")
    with pytest.raises(ValueError, match="bind_to must be an IPv4 or IPv6 address without a port"):
        SlurmJob({"a": 1}, bind_to="10.0.0.1:80")
    with pytest.raises(ValueError, match="positive host count"):
        job.add_mesh("c", 0)
    job._slurm_job_id = "7"
    with pytest.raises(RuntimeError, match="after the job was submitted"):
        job.add_mesh("d", 1)
    import importlib.util

    if importlib.util.find_spec("clusterscope") is None:
        with pytest.raises(RuntimeError, match="please install clusterscope"):
            job.share_node(tasks_per_node=2, gpus_per_task=4, partition="gpu")


OUT_OF_CLUSTER_CLIENT = """\
import os, socket, sys
from monarch.actor import Actor, endpoint
from monarch.job import SlurmJob
from monarch._src.hosts.gateway import attached_to

class Host(Actor):
    @endpoint
    def where(self):
        return os.environ.get("SLURM_JOB_ID", "")

port, logs, gateway = int(sys.argv[1]), sys.argv[2], sys.argv[3]
options = {"attach_to": gateway} if gateway != "-" else {"out_of_cluster": True}
job = SlurmJob({"workers": 2}, python_exe=sys.executable, ntasks_per_node=2, exclusive=False,
               log_dir=logs, monarch_port=port, job_start_timeout=60, **options)
try:
    state = job.state()  # the client's first monarch call: it bootstraps through a worker
    print("attached", attached_to())
    procs = state.workers.spawn_procs(per_host={"gpus": 1})
    ids = sorted(procs.spawn("host", Host).where.call().get(timeout=60).values())
    print("job", job.job_id, "ids", " ".join(ids))
    procs.stop().get(timeout=60)
finally:
    job.kill()
"""


@pytest.mark.timeout(150)
@pytest.mark.parametrize("named", [False, True], ids=["out_of_cluster", "attach_to"])
def test_slurm_job_out_of_cluster_bootstraps_through_a_worker(slurm, tmp_path, named) -> None:
    import subprocess

    port = _two_free_ports()
    node = socket.gethostbyname(slurm.node)
    # out_of_cluster: the first worker; attach_to names one (here the node's second task)
    expected = f"tcp://{node}:{port + 1}" if named else f"tcp://{node}:{port}"
    out = subprocess.run(
        [sys.executable, "-c", OUT_OF_CLUSTER_CLIENT, str(port), str(tmp_path / "logs"),
         expected if named else "-"],
        env=dict(slurm.env, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))), cwd=str(tmp_path), capture_output=True,
        text=True, timeout=140)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert f"attached {expected}" in out.stdout
    job_id = out.stdout.split("job ", 1)[1].split()[0]
    assert f"ids {job_id} {job_id}" in out.stdout
