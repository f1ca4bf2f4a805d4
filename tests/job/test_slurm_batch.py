"""SlurmJob without a cluster: Slurm's commands are small scripts put first on PATH.

The batch runner (`_slurm_batch`), squeue's JSON in the forms of several Slurm releases, the
sbatch answers and the batch client's view of its job id.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from monarch._src.job import _slurm_batch
from monarch.job import SlurmJob

pytestmark = pytest.mark.timeout(60)


def _command(bin_dir: pathlib.Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("MONARCH_BATCH_JOB", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return d


def _runner(tmp_path: pathlib.Path, client: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MONARCH_BATCH_JOB"}
    return subprocess.run(
        [sys.executable, "-m", "monarch._src.job._slurm_batch", "--port", "30000", client],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50, check=False)


def test_runner_runs_the_client_then_ends_the_workers(tmp_path, bin_dir) -> None:
    # The fake srun records its arguments, says it is up, and waits for SIGTERM.
    _command(bin_dir, "srun", f"""\
trap 'echo terminated >> {tmp_path}/srun.log; exit 0' TERM
printf '%s\\n' "$@" > {tmp_path}/srun.args
echo up > {tmp_path}/srun.up
while true; do sleep 0.05; done
""")
    client = (f"{sys.executable} -c \"import os, pathlib, time; "
              f"p = pathlib.Path('srun.up'); "
              f"[time.sleep(0.05) for _ in range(400) if not p.exists()]; "
              f"open('client.txt', 'w').write(os.environ['MONARCH_BATCH_JOB']); "
              f"raise SystemExit(7)\"")
    done = _runner(tmp_path, client)
    assert done.returncode == 7, done.stderr
    assert (tmp_path / "client.txt").read_text() == "1"
    assert (tmp_path / "srun.log").read_text() == "terminated\n"
    args = (tmp_path / "srun.args").read_text().splitlines()
    assert args[:4] == ["--kill-on-bad-exit=0", sys.executable, "-c",
                        _slurm_batch.worker_bootstrap(30000)]


def test_runner_reports_a_missing_client(tmp_path, bin_dir) -> None:
    _command(bin_dir, "srun", "exec sleep 30\n")
    done = _runner(tmp_path, str(tmp_path / "no-such-program") + " --flag")
    assert done.returncode == 127
    assert "cannot run the client" in done.stderr and "no-such-program" in done.stderr


def test_worker_bootstrap_serves_on_the_task_port() -> None:
    code = _slurm_batch.worker_bootstrap(30000, "fe80::1")
    assert "tcp://[fe80::1]:{port}" in code and "30000 + int(os.environ.get('SLURM_LOCALID'" in code
    with pytest.raises(ValueError):
        _slurm_batch.worker_bootstrap(30000, "host:1")


def _squeue(bin_dir: pathlib.Path, doc: dict) -> None:
    (bin_dir / "squeue.json").write_text(json.dumps(doc))
    _command(bin_dir, "squeue", f"cat {bin_dir}/squeue.json\n")


def _running(job: SlurmJob, job_id: str = "5") -> SlurmJob:
    job._slurm_job_id = job_id
    job._status = "running"  # as apply() leaves it
    return job


def test_squeue_json_of_each_slurm_release(bin_dir) -> None:
    job = _running(SlurmJob({"a": 1, "b": 1}))
    # 24.05 and later: a list of state flags, nodes under job_resources.nodes.allocation
    _squeue(bin_dir, {"jobs": [{"job_id": 5, "job_state": ["RUNNING", "COMPLETING"],
                                "job_resources": {"nodes": {"allocation": [
                                    {"name": "n1"}, {"name": "n2"}]}}}]})
    assert job._job_state() == "RUNNING" and job._jobs_active()
    assert job._wait_for_job_start("5") == ["n1", "n2"]
    # 22.05: a string state, job_resources.allocated_nodes; squeue lists every job
    _squeue(bin_dir, {"jobs": [
        {"job_id": 4, "job_state": "CANCELLED", "nodes": "x"},
        {"job_id": 5, "job_state": "RUNNING", "nodes": "n[1-2]",
         "job_resources": {"nodes": "n[1-2]", "allocated_nodes": [
             {"nodename": "n1"}, {"nodename": "n2"}]}}]})
    assert job._wait_for_job_start("5") == ["n1", "n2"]
    # only the compressed list: scontrol expands it
    _command(bin_dir, "scontrol", 'test "$*" = "show hostnames n[1-2]" && printf "n1\\nn2\\n"\n')
    _squeue(bin_dir, {"jobs": [{"job_id": 5, "job_state": "RUNNING", "nodes": "n[1-2]"}]})
    assert job._wait_for_job_start("5") == ["n1", "n2"]


def test_wait_for_job_start_fails_on_an_ended_or_partial_job(bin_dir) -> None:
    job = _running(SlurmJob({"a": 2}))
    _squeue(bin_dir, {"jobs": [{"job_id": 5, "job_state": "FAILED"}]})
    assert not job._jobs_active()
    with pytest.raises(RuntimeError, match=r"ended \(FAILED\) before its workers came up"):
        job._wait_for_job_start("5")
    _squeue(bin_dir, {"jobs": []})
    assert job._job_state() == "GONE"
    _squeue(bin_dir, {"jobs": [{"job_id": 5, "job_state": "RUNNING", "job_resources": {
        "allocated_nodes": [{"nodename": "n1"}]}}]})
    with pytest.raises(RuntimeError, match="runs on 1 nodes, the job asks for 2"):
        job._wait_for_job_start("5")


def test_sbatch_answers(bin_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    job = SlurmJob({"a": 1}, log_dir=str(tmp_path / "logs"))
    _command(bin_dir, "sbatch", f"cat > {tmp_path}/submitted; echo 'Submitted batch job 42'\n")
    assert job._submit_slurm_job(1) == "42"
    assert (tmp_path / "submitted").read_text() == job.sbatch_script()
    _command(bin_dir, "sbatch", "cat > /dev/null; echo 'queued'\n")
    with pytest.raises(RuntimeError, match="could not parse job ID from sbatch's output 'queued"):
        job._submit_slurm_job(1)
    _command(bin_dir, "sbatch", "cat > /dev/null; echo 'invalid partition' >&2; exit 1\n")
    with pytest.raises(RuntimeError, match="Failed to submit SLURM job .*invalid partition"):
        job._submit_slurm_job(1)


def test_batch_client_takes_the_allocation_id_and_never_cancels_it(bin_dir,
                                                                  monkeypatch) -> None:
    _command(bin_dir, "scancel", f"echo \"$@\" >> {bin_dir}/scancel.log\n")
    job = SlurmJob({"a": 1})
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert job._resolved_job_id() is None  # a client inside some unrelated allocation
    monkeypatch.setenv("MONARCH_BATCH_JOB", "1")
    assert job._resolved_job_id() == "77"
    _squeue(bin_dir, {"jobs": [{"job_id": 77, "job_state": "RUNNING"}]})
    assert not job.active and job._jobs_active()  # cached before apply() marked it running
    job.kill()
    assert not (bin_dir / "scancel.log").exists()
    monkeypatch.delenv("MONARCH_BATCH_JOB")
    _running(job, "12").kill()
    assert (bin_dir / "scancel.log").read_text() == "12\n" and job.job_id is None


def test_cancelling_an_ended_job_is_quiet_and_a_live_one_is_not(bin_dir) -> None:
    _command(bin_dir, "scancel", "echo 'Job/step already completing or completed' >&2; exit 1\n")
    _squeue(bin_dir, {"jobs": [{"job_id": 5, "job_state": "COMPLETED"}]})
    _running(SlurmJob({"a": 1})).kill()
    _squeue(bin_dir, {"jobs": [{"job_id": 5, "job_state": "RUNNING"}]})
    with pytest.raises(RuntimeError, match="scancel 5 failed"):
        _running(SlurmJob({"a": 1})).kill()
