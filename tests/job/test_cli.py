"""The `monarch` command line, run as real subprocesses in a scratch project directory."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from monarch._src.job.pids import alive
from monarch.job import job_load

MONARCH = os.path.join(os.path.dirname(sys.executable), "monarch")
TIMEOUT = 60

JOBS = """\
from monarch.job import LocalJob, ProcessJob

local = LocalJob()
two_local = LocalJob(hosts=("a", "b"))
two_hosts = ProcessJob({"hosts": 2})
"""

# A plain script: it does not import monarch.
PLAIN = """\
import os
e = os.environ
print("rank", e["MONARCH_RANK"], "of", e["MONARCH_WORLD_SIZE"], open("data.txt").read(),
      "torchrun", e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["MASTER_PORT"] != "")
raise SystemExit(int(os.environ["MONARCH_RANK"]) + 3)
"""


def monarch(
    cwd: pathlib.Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MONARCH, *args], check=False, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, input=stdin)


def monarch_session(cwd: pathlib.Path, *args: str, script: str) -> tuple[int, str, str]:
    """Run `monarch ARGS` with `script` on its input, kept open until the command exits."""
    out_path, err_path = cwd / "session.out", cwd / "session.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([MONARCH, *args], cwd=cwd, stdin=subprocess.PIPE, stdout=out,
                                stderr=err, text=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write(script)
            proc.stdin.flush()
            code = proc.wait(timeout=TIMEOUT)
        finally:
            proc.stdin.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return code, out_path.read_text(), err_path.read_text()


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "jobs.py").write_text(JOBS)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "plain.py").write_text(PLAIN)
    (ws / "data.txt").write_text("v1")
    return tmp_path


@pytest.mark.timeout(150)
def test_cli_apply_exec_workspace_kill_on_process_job(project: pathlib.Path) -> None:
    applied = monarch(project, "apply", "jobs.py:two_hosts")
    assert applied.returncode == 0, applied.stderr
    job = job_load(str(project / ".monarch" / "job_state.pkl"))
    workers = list(job._host_to_pid.values())
    try:
        assert len(workers) == 2 and all(alive(p, a) for p, a in workers)

        again = monarch(project, "apply", "jobs.py:two_hosts")
        assert "already running" in again.stdout

        dest = str(project / "remote_ws")
        run = monarch(project, "exec", "--workspace", "ws", "--workspace-dest", dest,
                      "--per-host", '{"gpus": 2}', "--", "python", "plain.py")
        assert run.returncode == 6, run.stderr  # max of 3 + rank over 4 procs
        assert sorted(run.stdout.splitlines()) == [  # torchrun's view: gpus is the local dim
            f"[{r}] rank {r} of 4 v1 torchrun {r} {r % 2} 4 True" for r in range(4)]
        # both hosts (one machine here) get both files
        assert "sent 4 files" in run.stderr

        unchanged = monarch(project, "exec", "--workspace", "ws", "--workspace-dest", dest,
                            "--rank", "1", "--", "python", "plain.py")
        assert "sent 0 files" in unchanged.stderr
        # --rank picks host 1; its one proc is rank 0 of the procs spawned there
        assert unchanged.stdout == "[0] rank 0 of 1 v1 torchrun 0 0 1 True\n"
        assert unchanged.returncode == 3

        (project / "ws" / "data.txt").write_text("v2")
        changed = monarch(project, "exec", "--workspace", "ws", "--workspace-dest", dest,
                          "--rank", "0", "--", "python", "plain.py")
        assert "sent 2 files" in changed.stderr  # the changed file, to each host
        assert changed.stdout == "[0] rank 0 of 1 v2 torchrun 0 0 1 True\n"

        # torchmonarch's spellings: -e, --per-host DIM=N, --point, -m, --script
        spelled = monarch(project, "exec", "-e", "X=7", "--per-host", "gpus=2", "--point",
                          "hosts=1", "--", "bash", "-c", "echo $X $MONARCH_RANK_gpus $RANK")
        assert spelled.returncode == 0, spelled.stderr
        assert sorted(spelled.stdout.splitlines()) == ["[0] 7 0 0", "[1] 7 1 1"]
        module = monarch(project, "exec", "--rank", "0", "-m", "platform", "--", "--terse")
        assert module.returncode == 0 and module.stdout.startswith("[0] Linux"), module.stderr
        script = monarch(project, "exec", "--rank", "0", "--script", "-",
                         stdin="echo from-script $MONARCH_WORLD_SIZE\nexit 2\n")
        assert script.stdout == "[0] from-script 1\n" and script.returncode == 2
        bad = monarch(project, "exec", "--per-host", "gpus", "--", "true")
        assert bad.returncode == 1 and "takes DIM=N" in bad.stderr

        # The shell is interactive (a terminal on the host): the input stays open until the
        # remote shell exits, since end of input hangs the session up.
        code, out, err = monarch_session(project, "shell", "--host", "1",
                                         script="cd ws\ncat data.txt\necho size=$MONARCH_SIZE_HOSTS"
                                         "\nexit 3\n")
        assert code == 3 and "v2" in out and "size=1" in out, err
        # torchmonarch's spellings: --point, -e
        code, out, err = monarch_session(project, "shell", "--point", "hosts=1", "-e", "Y=8",
                                         script="echo Y=$Y; cat ws/data.txt; exit\n")
        assert code == 0 and "Y=8" in out and "v2" in out, err
        both = monarch(project, "shell", "--point", "hosts=1", "--host", "1", stdin="")
        assert both.returncode == 2 and "not allowed with argument" in both.stderr
        exclusive = monarch(project, "exec", "--all", "--mesh", "hosts", "--", "true")
        assert exclusive.returncode == 2 and "not allowed with argument" in exclusive.stderr
    finally:
        killed = monarch(project, "kill")
    assert killed.returncode == 0, killed.stderr
    assert not any(alive(p, a) for p, a in workers)
    assert not (project / ".monarch" / "job_state.pkl").exists()


def test_cli_exec_without_job_says_apply_first(project: pathlib.Path) -> None:
    run = monarch(project, "exec", "--", "true")
    assert run.returncode == 1 and "monarch apply" in run.stderr


def test_cli_contexts(project: pathlib.Path) -> None:
    # torchmonarch's layout: a directory per context, job_state.pkl links to the current one
    assert monarch(project, "context", "ls").stdout == "No contexts.\n"
    assert monarch(project, "context", "create", "dev", "jobs.py:local").returncode == 0
    assert monarch(project, "context", "use", "dev").returncode == 0
    link = project / ".monarch" / "job_state.pkl"
    assert os.readlink(link) == os.path.join("dev", "state.pkl")
    assert monarch(project, "context", "ls").stdout.splitlines() == ["  default", "* dev"]
    assert monarch(project, "apply").returncode == 0  # the context's recorded spec
    assert (project / ".monarch" / "dev" / "state.pkl").exists()
    assert monarch(project, "context", "use", "other").returncode == 0  # created, as upstream
    listed = monarch(project, "context", "ls").stdout.splitlines()
    assert listed == ["  default", "  dev", "* other"]
    assert monarch(project, "context", "rm", "other").returncode == 0
    assert os.readlink(link) == os.path.join("default", "state.pkl")
    assert monarch(project, "context", "rm", "dev").returncode == 0  # kills its job
    assert not (project / ".monarch" / "dev").exists()
    bad = monarch(project, "context", "rm", "nope")
    assert bad.returncode == 1 and "No context 'nope'" in bad.stderr


def test_cli_apply_bad_spec_is_clear(project: pathlib.Path) -> None:
    run = monarch(project, "apply", "jobs.py:missing")
    assert run.returncode == 1 and "defines no 'missing'" in run.stderr


def test_cli_worker_delegates_to_the_worker_command(project: pathlib.Path) -> None:
    run = monarch(project, "worker", "--help")
    assert run.returncode == 0 and "--address" in run.stdout


@pytest.mark.timeout(120)
def test_cli_exec_all_meshes_then_kill(project: pathlib.Path) -> None:
    applied = monarch(project, "apply", "jobs.py:two_local")
    assert applied.returncode == 0, applied.stderr
    run = monarch(project, "exec", "--all", "--kill", "--", "bash", "-c", "echo ran; exit 1")
    assert run.returncode == 1, run.stderr
    # --all sends each proc's output to files on its host and says where, once per mesh
    reports = [line for line in run.stdout.splitlines() if line.startswith("Output → ")]
    assert len(reports) == 2, run.stdout
    for report in reports:
        where = report.split()[2].split("<point>")[0]
        try:  # a mesh without dimensions: its one proc's point is empty
            with open(os.path.join(where, "stdout.txt")) as f:
                assert f.read() == "ran\n"
        finally:
            shutil.rmtree(os.path.dirname(where.rstrip("/")))
    assert "killed" in run.stdout
    assert not (project / ".monarch" / "job_state.pkl").exists()
