"""`procstat`'s zombie rule on a real process: a child that exited but is not reaped yet still
has a /proc entry, in state Z, and is not alive; once reaped it has none."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from monarch._src.procstat import process_alive, process_state

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="procstat reads /proc."),
]


def test_process_state_unreaped_child_zombie_not_alive_then_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        before = process_state(child.pid)
        # Blocks until the child has exited, and leaves it unreaped (WNOWAIT): a zombie.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        zombie = process_state(child.pid)
        assert zombie is not None and zombie.state == "Z"
        assert not zombie.alive and not process_alive(child.pid)
        assert zombie.ppid == os.getpid()
        if before is not None:  # read before the exit: the same process
            assert before.start_ticks == zombie.start_ticks
    finally:
        child.wait(timeout=10)
    after = process_state(child.pid)
    assert after is None or after.start_ticks != zombie.start_ticks  # gone, or pid reused
