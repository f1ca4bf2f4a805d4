"""`procstat.process_state` reads /proc/<pid>/stat: the fields past a command name that holds
parentheses and spaces, and None for a pid that does not exist. (The zombie rule needs a child
process: tests/faults/test_procstat.py.)"""

from __future__ import annotations

import ctypes
import os
import threading

import pytest

from monarch._src.procstat import ProcessState, process_alive, process_start_time, process_state

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="procstat reads /proc."),
]

PR_SET_NAME = 15
# Above the largest pid Linux hands out (pid_max is at most 2**22).
NO_SUCH_PID = 2**22 + 12345


def test_process_state_of_self_alive_with_parent_and_start_time() -> None:
    stat = process_state(os.getpid())
    assert stat is not None
    assert stat.pid == os.getpid() and stat.ppid == os.getppid()
    assert stat.state in "RS" and stat.alive
    assert stat.start_ticks > 0 and process_start_time(os.getpid()) == stat.start_ticks
    assert process_alive(os.getpid())


def test_process_state_of_missing_pid_is_none_and_not_alive() -> None:
    assert process_state(NO_SUCH_PID) is None
    assert process_start_time(NO_SUCH_PID) is None
    assert not process_alive(NO_SUCH_PID)


def test_process_state_command_name_with_parentheses_and_spaces_parsed() -> None:
    # A thread's id is also a /proc entry, and a thread may rename itself: a name that looks
    # like the end of the command field must not shift the fields after it.
    seen: list[ProcessState | None] = []

    def rename_and_read() -> None:
        ctypes.CDLL(None).prctl(PR_SET_NAME, b"a) b (c) 1", 0, 0, 0)
        seen.append(process_state(threading.get_native_id()))

    thread = threading.Thread(target=rename_and_read)
    thread.start()
    thread.join(timeout=10)
    me = process_state(os.getpid())
    assert me is not None and len(seen) == 1 and seen[0] is not None
    assert seen[0].ppid == me.ppid and seen[0].alive


@pytest.mark.parametrize("state, alive", [("R", True), ("S", True), ("D", True), ("T", True),
                                          ("Z", False), ("X", False), ("x", False)])
def test_process_state_alive_false_only_for_zombie_and_dead(state: str, alive: bool) -> None:
    assert ProcessState(pid=1, state=state, ppid=0, start_ticks=1).alive is alive
