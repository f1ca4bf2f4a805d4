"""ProcessJob: worker processes as hosts, reused through the job cache, killed for real."""

from __future__ import annotations

import io
import os

import pytest

from monarch._src.job.pids import alive
from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob, exec_command, job_load

TIMEOUT = 60.0


class Where(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getppid()


def _worker_pids(job: ProcessJob) -> list[tuple[int, str]]:
    return [tuple(w) for w in job._host_to_pid.values()]


@pytest.mark.timeout(120)
def test_process_job_hosts_cache_reuse_and_kill(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    job = ProcessJob({"trainers": 2, "ps": 1})
    state = job.state()
    workers = _worker_pids(job)
    try:
        assert len(workers) == 3 and all(alive(pid, addr) for pid, addr in workers)
        assert state.trainers.sizes == {"hosts": 2} and state.ps.sizes == {"hosts": 1}
        procs = state.trainers.spawn_procs(per_host={"gpus": 2})
        parents = procs.spawn("where", Where).pid.call().get(timeout=TIMEOUT)
        # procs of different hosts have different parents (each worker forks its own)
        assert len({p for _, p in parents.items()}) == 2
        out = io.StringIO()
        code = exec_command(state.ps, "echo $MONARCH_SIZE_HOSTS", stdout=out).get(timeout=TIMEOUT)
        assert code == 0 and out.getvalue() == "[0] 1\n"
        procs.stop().get(timeout=TIMEOUT)

        # A second spec with the same meshes is served by the cached, still running workers.
        again = ProcessJob({"trainers": 2, "ps": 1})
        cached = job_load()
        assert cached.can_run(again)
        assert again.state().trainers.sizes == {"hosts": 2}
        assert not again.active  # nothing new was started
        assert _worker_pids(job_load()) == workers
        assert not cached.can_run(ProcessJob({"trainers": 3}))
    finally:
        job.kill()
    assert not any(alive(pid, addr) for pid, addr in workers)
    assert not job.active


def test_process_job_rejects_bad_meshes() -> None:
    with pytest.raises(TypeError, match="non-empty dict"):
        ProcessJob({})
    with pytest.raises(ValueError, match="positive host count"):
        ProcessJob({"trainers": 0})
    with pytest.raises(ValueError, match="Python identifier"):
        ProcessJob({"not a name": 1})


BATCH_CLIENT = """\
import os
from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob

class Tag(Actor):
    @endpoint
    def tag(self):
        return os.environ.get("WORKER_TAG", "none")

state = ProcessJob({"trainers": 2}).state()
procs = state.trainers.spawn_procs(per_host={"gpus": 2})
tags = sorted(t for _, t in procs.spawn("tag", Tag).tag.call().get(timeout=60).items())
with open("result.txt", "w") as f:
    f.write(os.environ["MONARCH_BATCH_JOB"] + " " + " ".join(tags))
"""


def _exit_code(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.timeout(150)
def test_process_job_batch_mode_runs_the_client_on_its_workers(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "client.py").write_text(BATCH_CLIENT)
    job = ProcessJob({"trainers": 2}, env={"WORKER_TAG": "from-apply"})
    job.apply("client.py")
    workers = _worker_pids(job)
    try:
        assert job.batch_pid is not None and len(workers) == 2
        code = _exit_code(job.batch_pid)
        logs = [p.read_text() for p in (tmp_path / ".monarch" / "logs").iterdir()]
        assert code == 0, logs
        # the client's job.state() used the workers apply() started (their env shows)
        assert (tmp_path / "result.txt").read_text() == "1 " + " ".join(["from-apply"] * 4)
        # and they ended with the client
        assert not any(alive(pid, addr) for pid, addr in workers)
    finally:
        job.kill()


@pytest.mark.timeout(150)
def test_process_job_batch_workers_end_even_when_the_client_fails(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "client.py").write_text("raise SystemExit(3)\n")
    job = ProcessJob({"trainers": 1})
    job.apply("client.py")
    workers = _worker_pids(job)
    try:
        assert _exit_code(job.batch_pid) == 3  # type: ignore[arg-type]
        assert not any(alive(pid, addr) for pid, addr in workers)
    finally:
        job.kill()


def test_process_job_batch_script_must_exist(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    job = ProcessJob({"trainers": 1})
    with pytest.raises(FileNotFoundError, match="'missing.py' does not exist"):
        job.apply("missing.py")
    assert not job.active and job._host_to_pid == {}  # nothing was started


@pytest.mark.timeout(90)
def test_process_job_retries_a_worker_whose_port_was_taken(monkeypatch) -> None:
    import socket

    from monarch._src.job import process

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_free_port = process.free_port
    ports = iter([taken])
    monkeypatch.setattr(process, "free_port",
                        lambda host: next(ports, None) or real_free_port(host))
    job = ProcessJob({"solo": 1})
    try:
        job.apply()
        pid, address = job._host_to_pid["solo_0"]
        assert address != f"tcp://127.0.0.1:{taken}" and alive(pid, address)
    finally:
        job.kill()
        squatter.close()


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


@pytest.mark.timeout(120)
def test_process_job_each_state_is_its_own_host_mesh_and_stop_keeps_the_other() -> None:
    # As on Monarch: every state() attaches anew, so two states are two host meshes over the
    # same workers, and stopping one ends only the procs it spawned.
    job = ProcessJob({"hosts": 2})
    try:
        first = job.state(cached_path=None).hosts
        second = job.state(cached_path=None).hosts
        assert first is not second
        mine = first.spawn_procs(name="first").spawn("pid", Pid).pid.call().get(timeout=TIMEOUT)
        theirs = second.spawn_procs(name="second").spawn("pid", Pid)
        their_pids = sorted(theirs.pid.call().get(timeout=TIMEOUT).values())
        first.stop().get(timeout=TIMEOUT)
        for pid in mine.values():
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert sorted(theirs.pid.call().get(timeout=TIMEOUT).values()) == their_pids
        second.shutdown().get(timeout=TIMEOUT)
    finally:
        job.kill()


@pytest.mark.timeout(120)
def test_shutting_the_hosts_down_ends_the_workers_even_right_after_state() -> None:
    # As on torchmonarch (upstream's scoped_state ends this way): a shutdown right after
    # state(), while the attach may still be in flight, still tells every worker to exit.
    from tests.pidwait import exits

    job = ProcessJob({"hosts": 2})
    try:
        state = job.state(cached_path=None)
        pids = [job._host_to_pid[f"hosts_{i}"].pid for i in range(2)]
        state.hosts.shutdown().get(timeout=TIMEOUT)
        assert all(exits(pid, 30) for pid in pids)
    finally:
        job.kill()
