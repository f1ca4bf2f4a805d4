"""hosts_from_dask over a real Dask scheduler and `monarch worker --dask-scheduler` workers.

The workers listen on 127.0.0.2 and 127.0.0.3, so the scheduler sees two machines and the
host mesh gets two hosts; a LocalCluster (all workers on one IP) gives one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.hosts.dask import pick_workers
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, endpoint, hosts_from_config, hosts_from_dask
from tests.hosts.conftest import REPO, end_processes, free_port, wait_listening, worker_env


class Pid(Actor):
    @endpoint
    def pid(self) -> tuple[int, str]:
        from monarch._src.runtime.runtime import get_runtime

        return os.getpid(), get_runtime().address


class DaskCluster:
    """A `dask scheduler` and `monarch worker --dask-scheduler` processes on loopback IPs."""

    def __init__(self, worker_hosts: list[str]) -> None:
        port = free_port("127.0.0.1")
        self.address = f"tcp://127.0.0.1:{port}"
        env = worker_env()
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", str(port), "--no-dashboard"],
            env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
        )
        self.workers: list[subprocess.Popen[bytes]] = []
        try:
            wait_listening(self.scheduler, "127.0.0.1", port)
            for host in worker_hosts:
                self.workers.append(subprocess.Popen(
                    [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--dask-scheduler",
                     self.address, "--host", host],
                    env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                ))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        end_processes([*self.workers, self.scheduler])


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskCluster]:
    """One cluster for the module; the host-loss test, which kills a worker, runs last."""
    c = DaskCluster(["127.0.0.2", "127.0.0.3"])
    try:
        yield c
    finally:
        c.close()


def test_pick_workers_takes_one_worker_per_machine() -> None:
    workers = {
        "tcp://10.0.0.3:4001": {"host": "10.0.0.3"},
        "tcp://10.0.0.2:4002": {"host": "10.0.0.2"},
        "tcp://10.0.0.2:4001": {"host": "10.0.0.2"},
        "tcp://10.0.0.10:4000": {"host": "10.0.0.10"},
    }
    assert pick_workers(workers) == [
        "tcp://10.0.0.2:4001", "tcp://10.0.0.3:4001", "tcp://10.0.0.10:4000"]


def test_hosts_from_dask_rejects_other_targets() -> None:
    with pytest.raises(TypeError, match="scheduler_address"):
        hosts_from_dask(42)


@pytest.mark.timeout(90)
def test_hosts_from_config_reads_a_scheduler_address(
    cluster: DaskCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributed import Client

    with Client(cluster.address, set_as_default=False, timeout=30) as client:
        client.wait_for_workers(2, timeout=45)
    monkeypatch.setenv("MONARCH_TEST_SCHEDULER", cluster.address)
    hosts = hosts_from_config("MONARCH_TEST_SCHEDULER")
    try:
        assert hosts.extent.sizes == [2]
        mesh = hosts.spawn_procs().spawn("pid", Pid)
        assert len(mesh.pid.call().get(timeout=30)) == 2
    finally:
        hosts.shutdown().get(timeout=30)
    # hosts on Dask workers are detached, not ended: a second client can use them.
    again = hosts_from_config("MONARCH_TEST_SCHEDULER")
    try:
        assert len(again.spawn_procs().spawn("pid", Pid).pid.call().get(timeout=30)) == 2
    finally:
        again.shutdown().get(timeout=30)


_LOCAL_CLUSTER = r"""
import json, warnings
warnings.simplefilter("error")
from distributed import LocalCluster
from monarch.actor import Actor, endpoint, hosts_from_dask
class P(Actor):
    @endpoint
    def pid(self):
        import os
        return os.getpid()
import sys
with LocalCluster(n_workers=2, processes=sys.argv[1] == "processes", threads_per_worker=1,
                  dashboard_address=":0", worker_dashboard_address=":0") as cluster:
    hosts = hosts_from_dask(cluster)
    mesh = hosts.spawn_procs(per_host={"gpus": 2}).spawn("p", P)
    pids = [v for _, v in mesh.pid.call().get(timeout=30).items()]
    hosts.shutdown().get(timeout=30)
print(json.dumps({"sizes": hosts.extent.sizes, "pids": pids}))
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("workers", ["processes", "threads"])
def test_local_cluster_is_one_host(workers: str) -> None:
    """Worker processes host the agent themselves; thread workers inside the client get a
    `monarch worker` subprocess as their host."""
    out = subprocess.run([sys.executable, "-c", _LOCAL_CLUSTER, workers], env=worker_env(),
                         cwd=REPO, capture_output=True, timeout=80)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    result = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert result["sizes"] == [1]
    assert len(set(result["pids"])) == 2


@pytest.mark.timeout(90)
def test_dask_workers_become_hosts_and_host_loss_is_supervised(
    cluster: DaskCluster, fault_recorder: Any, fast_host_heartbeats: None
) -> None:
    from distributed import Client

    with Client(cluster.address, set_as_default=False, timeout=30) as client:
        client.wait_for_workers(2, timeout=45)
        hosts = hosts_from_dask(client, name="dask")
        try:
            assert hosts.extent.sizes == [2]
            procs = hosts.spawn_procs(per_host={"gpus": 2}, name="daskprocs")
            mesh = procs.spawn("pid", Pid)
            got = [v for _, v in mesh.pid.call().get(timeout=30).items()]
            ips = [addr.partition("://")[2].rpartition(":")[0] for _, addr in got]
            assert ips == ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]
            assert len({pid for pid, _ in got}) == 4
            # Losing the machine of host 1 (its Dask worker, which hosts the agent).
            started = time.monotonic()
            cluster.workers[1].send_signal(signal.SIGKILL)
            texts = fault_recorder.wait_for(2, timeout=20)
            assert time.monotonic() - started < 10
            joined = "\n".join(texts)
            assert "crashed_ranks=[2]" in joined and "crashed_ranks=[3]" in joined
            with pytest.raises(SupervisionError):
                mesh.slice(hosts=1).pid.call().get(timeout=10)
            assert len(mesh.slice(hosts=0).pid.call().get(timeout=10)) == 2
        finally:
            hosts.shutdown().get(timeout=30)
        assert client.status == "running"  # a client we were given stays open


@pytest.mark.timeout(90)
def test_scheduler_removing_a_worker_loses_its_host(
    cluster: DaskCluster, fault_recorder: Any
) -> None:
    """The scheduler's remove-worker event alone (the worker process lives on, heartbeats
    would take 10 s) fails the ranks of that worker's host."""
    from distributed import Client

    with Client(cluster.address, set_as_default=False, timeout=30) as client:
        client.wait_for_workers(1, timeout=45)
        hosts = hosts_from_dask(client, name="removed")
        try:
            mesh = hosts.spawn_procs(name="onremoved").spawn("pid", Pid)
            mesh.pid.call().get(timeout=30)
            worker = pick_workers(client.scheduler_info(n_workers=-1)["workers"])[0]

            async def remove(dask_scheduler: Any) -> None:
                await dask_scheduler.remove_worker(worker, stimulus_id="monarch-test",
                                                   close=False)

            started = time.monotonic()
            client.run_on_scheduler(remove)
            texts = fault_recorder.wait_for(1, timeout=8)
            assert time.monotonic() - started < 8
            assert "Dask scheduler removed its worker" in texts[0]
            assert "crashed_ranks=[0]" in texts[0]
        finally:
            hosts.shutdown().get(timeout=30)

