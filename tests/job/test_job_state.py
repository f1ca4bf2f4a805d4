"""JobTrait's lifecycle and state caching, with LocalJob and a counting job defined here."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from monarch.job import (
    DEFAULT_JOB_PATH,
    JobState,
    JobTrait,
    LocalJob,
    job_load,
    job_loads,
)


class CountingJob(JobTrait):
    """A job whose hosts are this machine; counts how often it was created and killed."""

    def __init__(self, tag: str = "a", runnable: bool = True) -> None:
        super().__init__()
        self.tag = tag
        self.runnable = runnable
        self.created = 0
        self.killed = 0
        self._live_conn = object()  # stands for a connection: must never be pickled

    def can_run(self, spec: JobTrait) -> bool:
        return self.runnable and isinstance(spec, CountingJob) and spec.tag == self.tag

    def _create(self, client_script: str | None) -> None:
        self.created += 1

    def _state(self) -> JobState:
        return JobState({"workers": f"hosts-of-{self.tag}"})

    def _kill(self) -> None:
        self.killed += 1
        marker = getattr(self, "kill_marker", None)
        if marker:  # observable from a test after the pickle that held this job is gone
            with open(marker, "w") as f:
                f.write(self.apply_id or "")


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_apply_running_job_is_noop() -> None:
    job = CountingJob()
    job.apply()
    first = job.apply_id
    job.apply()
    assert job.created == 1 and job.apply_id == first and job.active


def test_state_without_cache_applies_and_writes_pickle(in_tmp) -> None:
    job = CountingJob()
    state = job.state()
    assert state.workers == "hosts-of-a"
    assert os.path.exists(in_tmp / DEFAULT_JOB_PATH)
    cached = job_load()
    assert cached.apply_id == job.apply_id and cached.active
    assert not hasattr(cached, "_live_conn")


def test_state_cache_hit_reuses_compatible_job(in_tmp) -> None:
    CountingJob().state()
    fresh = CountingJob()
    assert fresh.state().workers == "hosts-of-a"
    assert fresh.created == 0 and not fresh.active


def test_state_cache_miss_kills_incompatible_job(in_tmp) -> None:
    old = CountingJob(tag="a")
    old.state()
    new = CountingJob(tag="b")
    assert new.state().workers == "hosts-of-b"
    assert new.created == 1
    # the file now holds the new job
    assert job_load().tag == "b"


def test_state_cache_miss_kills_cached_job(in_tmp) -> None:
    old = CountingJob(tag="a", runnable=False)
    old.kill_marker = str(in_tmp / "killed")
    old.state()
    job = CountingJob(tag="a")
    job.state()
    assert job.created == 1
    assert (in_tmp / "killed").read_text() == old.apply_id


def test_state_cached_path_none_writes_nothing(in_tmp) -> None:
    CountingJob().state(cached_path=None)
    assert not os.path.exists(in_tmp / ".monarch")


def test_state_follows_symlink(in_tmp) -> None:
    os.makedirs("real")
    os.symlink("real/job.pkl", "link.pkl")
    CountingJob().state(cached_path="link.pkl")
    assert os.path.isfile("real/job.pkl") and os.path.islink("link.pkl")


def test_dump_load_keeps_apply_id_and_status(in_tmp) -> None:
    job = CountingJob()
    job.apply()
    job.dump("sub/dir/job.pkl")
    loaded = job_load("sub/dir/job.pkl")
    assert loaded.apply_id == job.apply_id and loaded.active
    again = job_loads(job.dumps())
    assert again.apply_id == job.apply_id


def test_job_loads_rejects_non_job() -> None:
    with pytest.raises(TypeError, match="expected a pickled JobTrait"):
        job_loads(pickle.dumps({"not": "a job"}))


def test_job_load_missing_file_says_what_to_do(in_tmp) -> None:
    with pytest.raises(FileNotFoundError, match="monarch apply"):
        job_load("nope.pkl")


def test_kill_marks_not_running() -> None:
    job = CountingJob()
    job.apply()
    job.kill()
    assert not job.active and job.killed == 1


def test_job_state_unknown_name_lists_available() -> None:
    state = JobState({"trainers": 1, "ps": 2})
    assert state.trainers == 1
    with pytest.raises(AttributeError,
                       match="'nope' is not a valid host mesh name. Available names: ps, trainers"):
        state.nope  # noqa: B018


def test_local_job_every_mesh_is_this_host(in_tmp) -> None:
    from monarch.actor import this_host

    job = LocalJob(hosts=("trainers", "ps"))
    state = job.state()
    assert state.trainers == this_host() and state.ps == this_host()
    assert not job.can_run(LocalJob(hosts=("trainers", "ps")))


def test_local_job_rejects_string_hosts() -> None:
    with pytest.raises(TypeError, match="sequence of mesh names"):
        LocalJob(hosts="trainers")


def test_observability_is_accepted_and_mount_declarations_are_checked(tmp_path) -> None:
    job = CountingJob()
    assert job.enable_telemetry() is job and job.enable_admin() is job
    with pytest.raises(ValueError, match="python_exe '.venv/bin/python' not found locally"):
        job.remote_mount(str(tmp_path))
    with pytest.raises(TypeError, match="unknown keywords"):
        job.remote_mount(str(tmp_path), python_exe=None, chunk=1)
    job.remote_mount(str(tmp_path), python_exe=None)
    job.gather_mount("/a", "/b")
    assert len(job.__dict__["_mount_specs"]) == 2  # declared only: nothing mounts before state()


@pytest.mark.timeout(90)
def test_local_job_batch_client_reuses_the_cached_job(in_tmp) -> None:
    from monarch._src.job.local import launch_batch_client

    (in_tmp / "client.py").write_text(
        "import os\n"
        "from monarch.job import LocalJob\n"
        "state = LocalJob(hosts=('workers',)).state()\n"
        "open('seen.txt', 'w').write(os.environ['MONARCH_BATCH_JOB'] + ' ' + str(state))\n"
    )
    pid = launch_batch_client(LocalJob(hosts=("workers",)), "client.py")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, list((in_tmp / ".monarch" / "logs").iterdir())
    assert (in_tmp / "seen.txt").read_text().startswith("1 JobState(hosts={'workers': <")
    assert any(p.name.startswith("job_") for p in (in_tmp / ".monarch" / "logs").iterdir())


@pytest.mark.timeout(90)
def test_a_batch_client_reaped_by_its_pid_leaves_no_warning_at_exit(in_tmp) -> None:
    # The applying process keeps the client's Popen; a user who waits on its pid instead
    # must not get "ResourceWarning: subprocess N is still running" when that process exits.
    (in_tmp / "client.py").write_text("")
    script = ("import os\n"
              "from monarch.job import LocalJob\n"
              "job = LocalJob()\n"
              "job.apply('client.py')\n"
              "os.waitpid(job.process.pid, 0)\n")
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script],
                          cwd=in_tmp, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_batch_client_script_must_exist(in_tmp) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LocalJob().apply("missing.py")


def test_local_job_process_is_the_batch_client(in_tmp) -> None:
    with pytest.raises(ValueError, match="no local batch job"):
        LocalJob().process  # noqa: B018
    (in_tmp / "client.py").write_text("raise SystemExit(4)\n")
    job = LocalJob()
    job.apply("client.py")
    assert job.process.wait(timeout=60) == 4
    assert job_load(filename=DEFAULT_JOB_PATH) is not None  # torchmonarch's parameter name
