"""DaskJob over a real Dask LocalCluster (scheduler and a worker process on loopback)."""

from __future__ import annotations

import os

import pytest

from monarch._src.job.dask_job import scheduler_address
from monarch.actor import Actor, endpoint
from monarch.job import DaskJob, job_loads

TIMEOUT = 60.0


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


class FakeManager:
    scheduler_address = "tcp://10.1.2.3:8786"


class FakeClient:
    class scheduler:
        address = "tcp://10.1.2.4:8786"


def test_scheduler_address_from_every_kind_of_target() -> None:
    assert scheduler_address("tcp://h:8786") == "tcp://h:8786"
    assert scheduler_address(FakeManager()) == "tcp://10.1.2.3:8786"
    assert scheduler_address(FakeClient()) == "tcp://10.1.2.4:8786"
    with pytest.raises(ValueError, match="not a scheduler address"):
        scheduler_address("h:8786")
    with pytest.raises(TypeError, match="cannot find a scheduler address on int"):
        scheduler_address(3)


def test_dask_job_pickles_the_address_not_the_cluster() -> None:
    job = DaskJob(FakeManager(), meshes={"trainers": 2})
    loaded = job_loads(job.dumps())
    assert loaded.address == "tcp://10.1.2.3:8786" and loaded._live_cluster is None


@pytest.mark.timeout(120)
def test_dask_job_on_local_cluster(tmp_path, monkeypatch) -> None:
    from distributed import LocalCluster

    monkeypatch.chdir(tmp_path)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster:
        job = DaskJob(cluster, meshes={"trainers": 1})
        state = job.state(cached_path=None)
        try:
            assert state.trainers.sizes == {"hosts": 1}
            procs = state.trainers.spawn_procs(per_host={"gpus": 2})
            pids = procs.spawn("pid", Pid).pid.call().get(timeout=TIMEOUT)
            assert len({p for _, p in pids.items()}) == 2
            procs.stop().get(timeout=TIMEOUT)
            too_big = DaskJob(cluster.scheduler_address, meshes={"a": 1, "b": 1})
            too_big._live_hosts = job._live_hosts  # same cluster, already attached
            with pytest.raises(RuntimeError, match="need 2 hosts but the cluster"):
                too_big._state()
            too_big._live_hosts = None
        finally:
            job.kill()


DASK_CLIENT = """\
import os
from monarch.actor import Actor, endpoint
from monarch.job import DaskJob

class Pid(Actor):
    @endpoint
    def pid(self):
        return os.getpid()

state = DaskJob(os.environ["SCHEDULER"], meshes={"trainers": 1}).state()
procs = state.trainers.spawn_procs(per_host={"gpus": 2})
pids = procs.spawn("pid", Pid).pid.call().get(timeout=60)
with open("result.txt", "w") as f:
    f.write(f"{os.environ['MONARCH_BATCH_JOB']} {len({p for _, p in pids.items()})}")
"""


@pytest.mark.timeout(150)
def test_dask_job_batch_mode_runs_the_client_and_keeps_the_cluster(tmp_path, monkeypatch) -> None:
    from distributed import Client, LocalCluster

    monkeypatch.chdir(tmp_path)
    (tmp_path / "client.py").write_text(DASK_CLIENT)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster:
        monkeypatch.setenv("SCHEDULER", cluster.scheduler_address)
        job = DaskJob(cluster, meshes={"trainers": 1})
        job.apply("client.py")
        assert job.batch_pid is not None
        _, status = os.waitpid(job.batch_pid, 0)
        logs = [p.read_text() for p in (tmp_path / ".monarch" / "logs").iterdir()]
        assert os.waitstatus_to_exitcode(status) == 0, logs
        assert (tmp_path / "result.txt").read_text() == "1 2"
        # the cluster outlives the batch client: its worker is still there
        with Client(cluster.scheduler_address, set_as_default=False) as client:
            assert len(client.scheduler_info()["workers"]) == 1


def test_dask_job_batch_script_must_exist(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        DaskJob("tcp://127.0.0.1:1", meshes={"a": 1}).apply("missing.py")
