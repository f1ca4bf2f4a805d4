"""exec_command, shell and workspace shipping on this machine's host."""

from __future__ import annotations

import io
import os
import pathlib
import sys
import threading
import time
from typing import Any

import pytest

from monarch.actor import ActorError, this_host
from monarch.job import exec_command, shell, sync_workspace

TIMEOUT = 60.0

# A plain script: no monarch in it.
SCRIPT = """\
import os, sys
rank = int(os.environ["MONARCH_RANK"])
print(f"out {rank} {os.environ['MONARCH_RANK_GPUS']}/{os.environ['MONARCH_SIZE_GPUS']}")
print(f"err {rank}", file=sys.stderr)
sys.exit(rank)
"""


def test_exec_command_streams_rank_prefixed_output_and_returns_max(tmp_path) -> None:
    script = tmp_path / "plain.py"
    script.write_text(SCRIPT)
    out, err = io.StringIO(), io.StringIO()
    code = exec_command(this_host(), [str(script)], per_host={"gpus": 3}, stdout=out, stderr=err
                        ).get(timeout=TIMEOUT)
    assert code == 2
    assert sorted(out.getvalue().splitlines()) == ["[0] out 0 0/3", "[1] out 1 1/3",
                                                   "[2] out 2 2/3"]
    assert sorted(err.getvalue().splitlines()) == ["[0] err 0", "[1] err 1", "[2] err 2"]


def test_exec_command_output_dir_per_proc_files_as_torchmonarch(tmp_path) -> None:
    out = io.StringIO()
    code = exec_command(this_host(), "echo out $MONARCH_RANK_gpus; echo err >&2",
                        per_host={"gpus": 2}, output_dir=str(tmp_path / "logs" / "$SUBDIR"),
                        stdout=out).get(timeout=TIMEOUT)
    assert code == 0 and out.getvalue() == ""  # to the files, not the caller
    for g in (0, 1):
        assert (tmp_path / "logs" / f"gpus_{g}" / "stdout.txt").read_text() == f"out {g}\n"
        assert (tmp_path / "logs" / f"gpus_{g}" / "stderr.txt").read_text() == "err\n"


def test_exec_command_one_host_with_env_and_workdir(tmp_path) -> None:
    out = io.StringIO()
    # rank picks a host (this_host() has one); per_host procs run on it
    code = exec_command(this_host(), "echo $GREETING $(pwd) $MONARCH_RANK $MONARCH_SIZE_gpus",
                        env={"GREETING": "hi"}, workdir=str(tmp_path), rank=0,
                        per_host={"gpus": 2}, stdout=out).get(timeout=TIMEOUT)
    assert code == 0
    assert sorted(out.getvalue().splitlines()) == [f"[0] hi {tmp_path} 0 2",
                                                   f"[1] hi {tmp_path} 1 2"]


def test_exec_command_bad_rank_names_range() -> None:
    with pytest.raises(IndexError, match="rank 1 is out of range for 1 hosts"):
        exec_command(this_host(), "true", rank=1, per_host={"gpus": 2}).get(timeout=TIMEOUT)


def test_exec_command_empty_command_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty command"):
        exec_command(this_host(), "  ").get(timeout=TIMEOUT)


def _session(script: bytes, out_path: pathlib.Path, **kwargs: Any) -> tuple[int, str]:
    """shell() on this host with `script` on a pipe kept open until the shell exits."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, script)
    try:
        with os.fdopen(read_fd, "r") as inp, open(out_path, "w") as out:
            code = shell(this_host(), stdin=inp, stdout=out, **kwargs)
    finally:
        os.close(write_fd)
    return code, out_path.read_text()


def test_shell_is_one_session_with_rank_variables(tmp_path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    code, out = _session(b"cd sub 2>/dev/null || cd .; X=5; ls; echo got-$X-$Y-$MONARCH_WORLD_SIZE"
                         b"; test -t 0 && echo on-a-terminal; exit 4\n",
                         tmp_path / "out.txt", env={"Y": "6", "SHELL": "/bin/bash"},
                         workdir=str(tmp_path))
    # one shell: the variable set before survives; the terminal echoes the input
    assert code == 4 and "marker.txt" in out and "got-5-6-1" in out
    assert "on-a-terminal" in out


def test_shell_end_of_input_hangs_up_the_running_command(tmp_path) -> None:
    read_fd, write_fd = os.pipe()
    started = tmp_path / "started"
    os.write(write_fd, f"touch {started}; sleep 60\n".encode())

    def close_when_started() -> None:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.close(write_fd)

    closer = threading.Thread(target=close_when_started)
    closer.start()
    begun = time.monotonic()
    with os.fdopen(read_fd, "r") as inp, open(tmp_path / "out.txt", "w") as out:
        code = shell(this_host(), stdin=inp, stdout=out, env={"SHELL": "/bin/bash"})
    closer.join()
    assert started.exists() and code == 128 + 1  # SIGHUP, as when a terminal closes
    assert time.monotonic() - begun < 20


def test_shell_arguments_are_checked(tmp_path) -> None:
    with pytest.raises(ValueError, match="singleton HostMesh"):
        shell(_TwoHosts(this_host()), stdin=io.StringIO(""))
    with pytest.raises(TypeError, match="terminal or a pipe"):
        shell(this_host(), stdin=io.StringIO("ls\n"))
    with open(os.devnull) as inp, open(tmp_path / "out.txt", "w") as out, \
            pytest.raises(ActorError, match="does not exist on this host"):
        shell(this_host(), stdin=inp, stdout=out, workdir=str(tmp_path / "missing"))


class _TwoHosts:
    """Stands for a two-host mesh: shell only looks at its length before doing anything."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __len__(self) -> int:
        return 2


def test_sync_workspace_sends_only_changes(tmp_path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "pkg" / "b.py").write_text("print('b')")
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(src / "run.sh", 0o755)
    os.symlink("a.txt", src / "link")
    dest = tmp_path / "dest"
    host = this_host()

    first = sync_workspace(host, str(src), str(dest))
    assert first.sent == {0: ["a.txt", "link", "pkg/b.py", "run.sh"]}
    assert (dest / "pkg" / "b.py").read_text() == "print('b')"
    assert os.access(dest / "run.sh", os.X_OK) and os.readlink(dest / "link") == "a.txt"

    again = sync_workspace(host, str(src), str(dest))
    assert again.files_sent == 0 and again.removed == {0: []}

    (src / "a.txt").write_text("ALPHA")
    (src / "pkg" / "b.py").unlink()
    changed = sync_workspace(host, str(src), str(dest))
    assert changed.sent == {0: ["a.txt"]} and changed.removed == {0: ["pkg/b.py"]}
    assert (dest / "a.txt").read_text() == "ALPHA" and not (dest / "pkg" / "b.py").exists()


def test_sync_workspace_missing_dir_is_clear(tmp_path) -> None:
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        sync_workspace(this_host(), str(tmp_path / "nope"))


def test_exec_command_with_workspace_runs_there(tmp_path) -> None:
    src = tmp_path / "proj"
    src.mkdir()
    (src / "main.py").write_text("import os; print(os.path.basename(os.getcwd()))\n")
    out = io.StringIO()
    code = exec_command(this_host(), [sys.executable, "main.py"], workspace=str(src),
                        workspace_dest=str(tmp_path / "shipped"), stdout=out
                        ).get(timeout=TIMEOUT)
    assert code == 0 and out.getvalue() == "[0] shipped\n"
    assert pathlib.Path(tmp_path / "shipped" / "main.py").exists()


TORCHRUN_ENV = """\
import os
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME"]
print(" ".join(f"{k}={os.environ[k]}" for k in keys))
print("MASTER", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
"""


def test_exec_command_gives_each_rank_the_torchrun_environment(tmp_path) -> None:
    import socket

    script = tmp_path / "env.py"
    script.write_text(TORCHRUN_ENV)
    out = io.StringIO()
    code = exec_command(this_host(), [str(script)], per_host={"gpus": 3},
                        stdout=out).get(timeout=TIMEOUT)
    assert code == 0
    lines = out.getvalue().splitlines()
    ranks = sorted(line for line in lines if "RANK=" in line)
    # the procs of the one host are one torchrun node
    assert ranks == [
        f"[{r}] RANK={r} LOCAL_RANK={r} WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 GROUP_RANK=0 "
        f"GROUP_WORLD_SIZE=1 ROLE_RANK={r} ROLE_WORLD_SIZE=3 ROLE_NAME=rank" for r in range(3)]
    masters = {line.split(" ", 1)[1] for line in lines if "MASTER" in line}
    assert len(masters) == 1  # one rendezvous for every rank
    _, addr, port = masters.pop().split()
    assert addr == socket.gethostname() and 0 < int(port) < 65536
    # what the caller passes wins
    out = io.StringIO()
    assert exec_command(this_host(), "echo $MASTER_PORT $RANK", env={"MASTER_PORT": "1234"},
                        stdout=out).get(timeout=TIMEOUT) == 0
    assert out.getvalue() == "[0] 1234 0\n"


def test_exec_command_one_proc_per_host_is_local_rank_zero() -> None:
    out = io.StringIO()
    code = exec_command(this_host(), "echo $RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK",
                        stdout=out).get(timeout=TIMEOUT)
    assert code == 0 and out.getvalue() == "[0] 0 0 1 0\n"
