"""host_mesh_from_store: a HostMesh from inside a real torchrun job (2 ranks, gloo, loopback)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator

import pytest

from monarch._src.spmd.host_mesh import host_mesh_from_store
from tests.hosts.conftest import free_port
from tests.pidwait import exits

pytest.importorskip("torch")
pytestmark = pytest.mark.timeout(180)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


@pytest.fixture
def short_tmp() -> Iterator[str]:
    """A folder with a short path (a socket path holds 107 bytes), removed afterwards."""
    path = tempfile.mkdtemp(prefix="mhs", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _torchrun(hosts: int, tmp: str) -> dict[str, object]:
    """Run store_rendezvous_script.py under torchrun with 2 ranks; rank 0's RESULT line. The
    workers' socket folders go under `tmp` (TMPDIR), which the test removes."""
    env = dict(os.environ, PYTHONPATH=REPO, MONARCH_PRESTART="0", TMPDIR=tmp)
    out = subprocess.run(
        [TORCHRUN, "--nproc_per_node=2", "--master_addr=127.0.0.1",
         f"--master_port={free_port('127.0.0.1')}",
         os.path.join(HERE, "store_rendezvous_script.py"), str(hosts)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=150,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, out.stdout[-3000:]
    result: dict[str, object] = json.loads(lines[0][len("RESULT "):])
    return result


def test_each_local_rank_zero_starts_a_host_and_rank_zero_gets_the_mesh(short_tmp: str) -> None:
    # Each rank a host of its own (LOCAL_WORLD_SIZE 1): two workers, one per rank.
    result = _torchrun(2, short_tmp)
    assert result["extent"] == {"hosts": 2}
    procs = result["procs"]
    assert isinstance(procs, list) and len(procs) == 4
    # The procs of host g run under the worker that rank g started (its environment's RANK).
    assert {(p["point"]["hosts"], p["rank_env"]) for p in procs} == {(0, "0"), (1, "1")}
    assert len({p["ppid"] for p in procs}) == 2  # two hosts, each its own fork server


def test_ranks_of_one_machine_share_one_host(short_tmp: str) -> None:
    result = _torchrun(1, short_tmp)
    assert result["extent"] == {"hosts": 1}
    procs = result["procs"]
    assert isinstance(procs, list) and len(procs) == 2
    assert {p["rank_env"] for p in procs} == {"0"}  # only local rank 0 started a worker


def test_the_worker_ends_with_the_rank_that_started_it(short_tmp: str) -> None:
    program = textwrap.dedent("""
        import os, time
        from monarch._src.spmd.host_mesh import _spawn_worker_process
        addr, pid = _spawn_worker_process(transport="ipc", name="w")
        print(pid, addr, flush=True)
        time.sleep(600)
    """)
    rank = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=REPO, TMPDIR=short_tmp),
                            cwd=REPO)
    try:
        assert rank.stdout is not None
        pid_text, addr = rank.stdout.readline().split()
        worker = int(pid_text)
        assert addr.startswith("ipc://") and addr.endswith("/w")
        assert not exits(worker, 0.5)  # serving while its rank lives
        rank.send_signal(signal.SIGKILL)  # no cleanup runs in the rank
        assert exits(worker, 30)
    finally:
        rank.kill()
        rank.communicate(timeout=30)


def test_missing_topology_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError, match="LOCAL_RANK environment variable"):
        host_mesh_from_store({}, rank=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Meta's TLS"):
        host_mesh_from_store({}, transport="metatls", monarch_port=5000,  # type: ignore[arg-type]
                             rank=1, local_rank=0, world_size=2, local_world_size=1)
