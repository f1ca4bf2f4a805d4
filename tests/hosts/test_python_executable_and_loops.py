"""HostMesh.with_python_executable (local and remote hosts) and the worker-loop variants
run_worker_loop_until_shutdown / start_worker_loop_forever."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from monarch.actor import Actor, attach_to_workers, endpoint, this_host
from tests.hosts.conftest import REPO, Workers, end_processes, free_port, wait_listening, worker_env

TRUST = "trust_all_connections"


class Exe(Actor):
    @endpoint
    def exe(self) -> str:
        return sys.executable

    @endpoint
    def launcher_pid(self) -> str:
        import os

        return os.environ.get("LAUNCHER_PID", "")

    @endpoint
    def child(self, name: str) -> str:
        """Endpoint `name`'s answer from an actor on a proc this proc starts with this_host()."""
        from monarch.actor import this_host as here

        procs = here().spawn_procs()
        try:
            return getattr(procs.spawn("child", Exe), name).call_one().get(timeout=60)
        finally:
            procs.stop().get(timeout=60)


@pytest.fixture
def linked_python(tmp_path: Any) -> str:
    """A different path for this interpreter (a symlink): sys.executable in a proc shows it."""
    link = tmp_path / "bin" / "python-for-procs"
    link.parent.mkdir()
    link.symlink_to(sys.executable)
    return str(link)


def test_local_procs_run_the_given_interpreter(linked_python: str) -> None:
    hosts = this_host().with_python_executable(linked_python)
    assert hosts.python_executable == linked_python
    procs = hosts.spawn_procs(per_host={"gpus": 2})
    try:
        actors = procs.spawn("exe", Exe)
        assert list(actors.exe.call().get(timeout=60).values()) == [linked_python] * 2
        # procs those procs start inherit it
        assert actors.slice(gpus=0).child.call_one("exe").get(timeout=90) == linked_python
    finally:
        procs.stop().get(timeout=60)
    plain = this_host().spawn_procs()
    try:
        assert plain.spawn("exe", Exe).exe.call_one().get(timeout=60) == sys.executable
    finally:
        plain.stop().get(timeout=60)


def test_a_wrapper_script_launches_the_procs_and_their_procs(tmp_path: Any) -> None:
    # A launcher that is not the interpreter (a shell script exporting a variable, then
    # exec'ing Python): what it exports reaches the proc, and procs started from that proc with
    # this_host() go through it again (their own launcher pid), as on torchmonarch.
    wrapper = tmp_path / "launch-python"
    wrapper.write_text(f'#!/bin/sh\nexport LAUNCHER_PID=$$\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    procs = this_host().with_python_executable(str(wrapper)).spawn_procs()
    try:
        actor = procs.spawn("launched", Exe)
        direct = actor.launcher_pid.call_one().get(timeout=60)
        inner = actor.child.call_one("launcher_pid").get(timeout=90)
        assert direct.isdigit() and inner.isdigit() and inner != direct
    finally:
        procs.stop().get(timeout=60)


def test_bad_interpreters_are_refused_clearly(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="path of a Python interpreter"):
        this_host().with_python_executable(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty path"):
        this_host().with_python_executable("")
    with pytest.raises(ValueError, match="not an executable file on this host"):
        this_host().with_python_executable(str(tmp_path / "missing"))


def test_remote_procs_run_the_given_interpreter(linked_python: str) -> None:
    workers = Workers(["127.0.0.2"])
    try:
        hosts = attach_to_workers(ca=TRUST, workers=workers.addresses)
        try:
            # a remote path is not checked here (it names a file on the host)
            procs = hosts.with_python_executable(linked_python).spawn_procs()
            got = procs.spawn("exe", Exe).exe.call_one().get(timeout=60)
            assert got == linked_python
        finally:
            hosts.shutdown().get(timeout=30)
    finally:
        workers.close()


_UNTIL_SHUTDOWN = textwrap.dedent("""
    import sys
    from monarch.actor import run_worker_loop_until_shutdown
    run_worker_loop_until_shutdown(ca="trust_all_connections", address=sys.argv[1])
    print("returned after shutdown", flush=True)
""")

_START = textwrap.dedent("""
    import sys
    from monarch.actor import Future, start_worker_loop_forever
    fut = start_worker_loop_forever(ca="trust_all_connections", address=sys.argv[1])
    print("started", isinstance(fut, Future), fut.done(), flush=True)
    fut.get(timeout=120)
    print("future resolved", flush=True)
""")


@pytest.mark.parametrize("program,expected", [
    (_UNTIL_SHUTDOWN, "returned after shutdown\n"),
    (_START, "started True False\nfuture resolved\n"),
])
def test_worker_loop_variants_serve_until_shutdown(program: str, expected: str) -> None:
    host = "127.0.0.2"
    port = free_port(host)
    addr = f"tcp://{host}:{port}"
    proc = subprocess.Popen([sys.executable, "-c", program, addr], env=worker_env(), cwd=REPO,
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        wait_listening(proc, host, port)  # type: ignore[arg-type]
        hosts = attach_to_workers(ca=TRUST, workers=[addr])
        procs = hosts.spawn_procs()
        assert procs.spawn("exe", Exe).exe.call_one().get(timeout=60) == sys.executable
        hosts.shutdown().get(timeout=30)
        out, _ = proc.communicate(timeout=60)
        assert out.decode() == expected
        assert proc.returncode == 0
    finally:
        end_processes([proc])  # type: ignore[list-item]


def test_worker_loop_after_the_runtime_started_is_refused() -> None:
    program = textwrap.dedent("""
        from monarch.actor import this_proc, run_worker_loop_until_shutdown
        this_proc()
        try:
            run_worker_loop_until_shutdown(ca="trust_all_connections",
                                           address="tcp://127.0.0.1:1")
        except RuntimeError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", program], env=worker_env(), cwd=REPO,
                         capture_output=True, timeout=60)
    assert b"must be the first monarch call of its process" in out.stdout, out.stderr[-2000:]


class Paths(Actor):
    @endpoint
    def paths(self) -> tuple[str, list[str]]:
        return sys.prefix, list(sys.path)


def test_procs_of_another_venv_import_their_own_packages_first(tmp_path: Any) -> None:
    # A venv of its own whose site-packages also reaches this one's (for monarch and its
    # dependencies): its procs must find their own packages first, not the client's paths.
    import site
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    own_site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
        "site-packages"
    client_site = sysconfig.get_paths()["purelib"]
    (own_site / "reach_client.pth").write_text(
        f"import site; site.addsitedir({client_site!r})\n")
    procs = this_host().with_python_executable(str(venv / "bin" / "python")).spawn_procs()
    try:
        prefix, paths = procs.spawn("paths", Paths).paths.call_one().get(timeout=60)
    finally:
        procs.stop().get(timeout=60)
    assert prefix == str(venv)
    assert paths.index(str(own_site)) < paths.index(client_site), paths
    assert site.getsitepackages()  # this process is unchanged
