"""Nothing outlives its owner after a SIGKILL: the files a killed proc or controller made (its
RDMA shared-memory segment, its unix socket) are removed, and a killed controller's procs end.

The zygote that reaps a proc removes that proc's files before it reports the exit, so once the
fault is reported they are gone; when the controller is killed, the zygote kills and reaps its
procs and removes their files and the controller's before it exits.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from monarch.actor import this_host
from tests.pidwait import exits
from tests.rdma.actors import Owner, Peer

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning")]

T = 60.0
REPO = Path(__file__).resolve().parents[2]


def files_of(pid: int) -> list[str]:
    """The files named after process `pid` (`transport/owned_files.py`)."""
    from monarch._src.transport.owned_files import socket_dir

    return (glob.glob(f"/dev/shm/monarch-{pid}-*")
            + glob.glob(os.path.join(socket_dir(), f"{pid}-*")))


def test_killed_procs_files_are_removed_before_its_death_is_reported(
    monkeypatch: pytest.MonkeyPatch, fault_recorder: Any
) -> None:
    # The procs spawned now move bytes through /dev/shm segments.
    monkeypatch.setenv("MONARCH_RDMA_FORCE_PLANE", "shm")
    procs = this_host().spawn_procs(per_host={"procs": 2})
    try:
        owner = procs.spawn("leftover_owner", Owner, 4096)
        peer = procs.spawn("leftover_peer", Peer)
        buf = owner.slice(procs=0).make.call_one().get(timeout=T)
        values, plane = peer.slice(procs=1).read.call_one(buf).get(timeout=T)
        assert plane == "shm" and values[:3] == [0, 1, 2]
        pid = owner.slice(procs=1).pid.call_one().get(timeout=T)
        assert [f for f in files_of(pid) if f.endswith("-rdma")], files_of(pid)
        os.kill(pid, signal.SIGKILL)
        fault_recorder.wait_for(1, timeout=T)
        assert files_of(pid) == []
    finally:
        procs.stop().get(timeout=T)


_CONTROLLER = textwrap.dedent("""
    import os, sys, torch
    os.environ["MONARCH_RDMA_FORCE_PLANE"] = "shm"
    from monarch.actor import this_host
    from tests.rdma.actors import Owner
    from monarch.rdma import RDMABuffer
    procs = this_host().spawn_procs(per_host={"procs": 2})
    owner = procs.spawn("owner", Owner, 4096)
    pids = list(owner.pid.call().get(timeout=60).values())
    buf = owner.slice(procs=0).make.call_one().get(timeout=60)
    dst = torch.zeros(4096, dtype=torch.uint8)
    buf.read_into(dst).get(timeout=60)  # through this controller's own /dev/shm segment
    print("PIDS", *pids, flush=True)
    sys.stdin.readline()  # killed while waiting here
""")


def test_killed_controllers_procs_end_and_its_files_are_removed(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "MONARCH_DEFAULT_TRANSPORT": "unix"}  # the procs listen on unix socket files
    controller = subprocess.Popen([sys.executable, "-c", _CONTROLLER], cwd=tmp_path, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = controller.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("PIDS"), line
        procs = [int(p) for p in line.split()[1:]]
        children = Path(f"/proc/{controller.pid}/task/{controller.pid}/children").read_text()
        zygotes = [int(p) for p in children.split()]
        assert files_of(controller.pid) and all(files_of(p) for p in procs)
        controller.kill()
        controller.wait(timeout=T)
        for pid in [*procs, *zygotes]:
            assert exits(pid, T), f"process {pid} is still running"
        assert files_of(controller.pid) == []
        assert [files_of(p) for p in procs] == [[] for _ in procs]
    finally:
        if controller.poll() is None:
            controller.kill()
        controller.communicate(timeout=T)
