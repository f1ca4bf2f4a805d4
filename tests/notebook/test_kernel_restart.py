"""Restarting a real Jupyter kernel that spawned procs ends those procs, and the kernel itself.

A polite restart (`KernelManager.restart_kernel()`, Jupyter's restart button) and a kernel
SIGKILLed on its own (its procs must notice that their controller died), alone or with a child
it forked still running. Each waits for the
procs' pids to end within a bounded deadline; how fast they end is measured by
benchmarks/kernel_restart.py, not here.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.kernel import run_cell
from tests.pidwait import exits

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 10.0  # a bound for a loaded machine, not the figure (about 20 ms here)

SPAWN = textwrap.dedent("""
    import os
    from monarch.actor import Actor, endpoint, this_host

    class Pid(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    print("PIDS", *procs.spawn("pid", Pid).pid.call().get(timeout=60).values(), flush=True)
""")


FORK = textwrap.dedent("""
    import multiprocessing, time
    forked = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,),
                                                         daemon=True)
    forked.start()
""")


@pytest.fixture
def kernel() -> Iterator[tuple[Any, Any]]:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    manager, client = start_new_kernel(
        kernel_name="python3", cwd=str(REPO), env=env, startup_timeout=60
    )
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _spawn_procs(client: Any) -> list[int]:
    messages = run_cell(client, SPAWN)
    text = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    [line] = [ln for ln in text.splitlines() if ln.startswith("PIDS ")]
    pids = [int(pid) for pid in line.split()[1:]]
    assert len(pids) == 2
    return pids


def _still_running(pids: list[int], timeout: float) -> list[int]:
    """Wait up to `timeout` seconds in all for every pid to exit; those that have not."""
    deadline = time.monotonic() + timeout
    return [pid for pid in pids if not exits(pid, max(0.0, deadline - time.monotonic()))]


def test_restart_ends_the_kernels_procs_and_the_kernel_exits_by_itself(
    kernel: tuple[Any, Any],
) -> None:
    manager, client = kernel
    procs = _spawn_procs(client)
    old_kernel = manager.provisioner.process
    # Jupyter signals a kernel still there after half of this (SIGTERM), then after the other
    # half (SIGKILL): 15 s, ample for a kernel that exits by itself, and less than the 29 s
    # ipykernel waits for a child of its that never goes before it exits anyway.
    manager.shutdown_wait_time = 30.0
    manager.restart_kernel()
    assert _still_running(procs, GONE_WITHIN_S) == []
    # 0, not -SIGTERM: no child left unreaped (the zygote) held ipykernel's shutdown, which
    # waits until the processes of its group are gone, zombies included.
    assert old_kernel.returncode == 0
    client.wait_for_ready(timeout=60)
    assert _spawn_procs(client)  # the new kernel spawns procs as usual


@pytest.mark.parametrize("forked", [False, True], ids=["alone", "with_a_forked_child"])
def test_kernel_killed_alone_its_procs_notice_and_end(kernel: tuple[Any, Any], forked: bool,
                                                      ) -> None:
    manager, client = kernel
    procs = _spawn_procs(client)
    if forked:
        # A child the kernel forked (a multiprocessing worker under the fork start method)
        # keeps the kernel's end of its fork server's stdin open after the kernel died; it is
        # in the kernel's process group, which the fixture's shutdown kills.
        run_cell(client, FORK)
    # The kernel process only, not its process group (which would take the procs with it).
    os.kill(manager.provisioner.process.pid, signal.SIGKILL)
    assert _still_running(procs, GONE_WITHIN_S) == []
