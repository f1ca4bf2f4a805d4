"""`monarch apply`/`exec`/`kill` with a job that declares mounts: real CLI subprocesses, real FUSE.

The mounts outlive `monarch apply` (kept by the job's mount daemon), a command that attaches to
the job takes them over and hands them back, another set of declarations replaces them, and
`monarch kill` takes them down with the job.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from monarch._src.mount.fs import fuse_unavailable_reason, is_mounted

_NO_FUSE = fuse_unavailable_reason()
pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(_NO_FUSE is not None, reason=f"FUSE is unavailable: {_NO_FUSE}")]

JOB = textwrap.dedent("""\
    import os
    from monarch.job import ProcessJob

    base = os.path.abspath({label!r})
    job = ProcessJob({{"hosts": 2}})
    job.remote_mount(os.path.join(base, "src"), mntpoint=os.path.join(base, "mnt", "$SUBDIR"),
                     python_exe=None)
    job.gather_mount(os.path.join(base, "$SUBDIR"), os.path.join(base, "gathered"))
""")


def monarch(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Output to files: a process the command leaves running must not hold a pipe of ours open.
    out, err = cwd / "cli.out", cwd / "cli.err"
    with open(out, "w") as o, open(err, "w") as e:
        code = subprocess.run([sys.executable, "-m", "monarch.tools.cli", *args], cwd=cwd,
                              stdout=o, stderr=e, timeout=120, check=False).returncode
    return subprocess.CompletedProcess(args, code, out.read_text(), err.read_text())


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    for label in ("a", "b"):
        (tmp_path / label / "src").mkdir(parents=True)
        (tmp_path / label / "src" / "hello.txt").write_text(f"{label} v1\n")
        for i in range(2):
            (tmp_path / label / f"hosts_{i}").mkdir()
            (tmp_path / label / f"hosts_{i}" / "out.txt").write_text(f"{label} host {i}\n")
        (tmp_path / f"job_{label}.py").write_text(JOB.format(label=label))
    yield tmp_path
    monarch(tmp_path, "kill")


def test_cli_mounts_outlive_apply_follow_exec_switch_configs_and_go_with_kill(
        project: pathlib.Path) -> None:
    gathered_a, gathered_b = str(project / "a" / "gathered"), str(project / "b" / "gathered")
    applied = monarch(project, "apply", "job_a.job")
    assert applied.returncode == 0, applied.stderr
    assert is_mounted(gathered_a)  # after apply exited
    assert (project / "a" / "gathered" / "hosts_1" / "out.txt").read_text() == "a host 1\n"

    (project / "a" / "src" / "hello.txt").write_text("a v2\n")
    run = monarch(project, "exec", "cat", str(project / "a" / "mnt" / "hosts_0" / "hello.txt"))
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.splitlines()) == ["[0] a v2", "[1] a v2"]  # refreshed

    every = monarch(project, "exec", "--all", "--", "bash", "-c", "echo $MONARCH_RANK")
    assert every.returncode == 0, every.stderr
    assert every.stdout.startswith(f"Output → {gathered_a}/<host>/exec_outputs/")
    run_id = every.stdout.split("/exec_outputs/")[1].split("/")[0]
    for i in range(2):  # written on each host, under the gather mount's remote point
        out = project / "a" / f"hosts_{i}" / "exec_outputs" / run_id / "stdout.txt"
        assert out.read_text() == f"{i}\n"

    switched = monarch(project, "apply", "job_b.job")  # same hosts, other mounts
    assert switched.returncode == 0 and "already running" in switched.stdout, switched.stderr
    assert is_mounted(gathered_b) and not is_mounted(gathered_a)
    run = monarch(project, "exec", "cat", str(project / "b" / "mnt" / "hosts_0" / "hello.txt"))
    assert sorted(run.stdout.splitlines()) == ["[0] b v1", "[1] b v1"], run.stderr

    killed = monarch(project, "kill")
    assert killed.returncode == 0, killed.stderr
    assert not is_mounted(gathered_b)
    assert not any(is_mounted(str(project / "b" / "mnt" / f"hosts_{i}")) for i in range(2))
    again = monarch(project, "exec", "echo", "back")  # the recorded spec is applied again
    assert again.returncode == 0 and "[0] back" in again.stdout, again.stderr
    assert os.readlink(project / ".monarch" / "job_state.pkl") == os.path.join(
        "default", "state.pkl")
