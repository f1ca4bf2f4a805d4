"""The client's fault hook at the root of supervision (contract §2.4, §4.39).

A failure nobody handled reaches `monarch.actor.unhandled_fault_hook`. The default hook raises, and
a raising hook is fatal: the report goes to stderr, atexit handlers run and the process exits with
status 1. That would end pytest, so each case runs as a script in a subprocess and the test reads
its exit status and output. Markers printed by the script count what happened.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Bound on one script: it starts monarch, one proc mesh, and dies; about two seconds normally.
SCRIPT_TIMEOUT = 60.0

# Spawns `Boom` on `gpus` procs (the script defines GPUS first) and fails every rank with a
# broadcast, then waits far longer than the fault needs to end the process.
_PRELUDE = """
import atexit
import sys
import threading

import monarch.actor
from monarch.actor import Actor, endpoint, this_host

atexit.register(lambda: print("ATEXIT-MARKER", flush=True))


class Boom(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def boom(self) -> None:
        raise ValueError("boom from the script")
"""

_FAIL_AND_WAIT = """
procs = this_host().spawn_procs(per_host={"gpus": GPUS})
mesh = procs.spawn("doomed", Boom)
mesh.ping.call().get(timeout=30)
mesh.boom.broadcast()
threading.Event().wait(45)  # the fault hook ends the process long before this returns
print("SURVIVED", flush=True)
"""

# A hook that raises; it prints a marker per call.
_RAISING_HOOK = """
def hook(failure):
    print("HOOK-CALLED", flush=True)
    WAIT_BEFORE_RAISING()
    raise RuntimeError("the custom hook gives up")

monarch.actor.unhandled_fault_hook = hook
"""


def _run(*parts: str) -> subprocess.CompletedProcess[str]:
    script = "\n".join(textwrap.dedent(part) for part in (_PRELUDE, *parts))
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        timeout=SCRIPT_TIMEOUT,
        capture_output=True,
        text=True,
    )


def _explain(result: subprocess.CompletedProcess[str]) -> str:
    return f"status {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


@pytest.mark.timeout(120)
def test_default_fault_hook_exits_with_status_1_after_atexit_and_reports_to_stderr() -> None:
    result = _run("GPUS = 1", _FAIL_AND_WAIT)
    assert result.returncode == 1, _explain(result)
    assert "SURVIVED" not in result.stdout, _explain(result)
    assert result.stdout.count("ATEXIT-MARKER") == 1, _explain(result)
    assert "MeshFailure(mesh_name=doomed, crashed_ranks=[0]" in result.stderr, _explain(result)
    assert "boom from the script" in result.stderr, _explain(result)


@pytest.mark.timeout(120)
def test_raising_custom_fault_hook_is_called_once_and_exits_with_status_1() -> None:
    result = _run("GPUS = 1", "WAIT_BEFORE_RAISING = lambda: None", _RAISING_HOOK, _FAIL_AND_WAIT)
    assert result.returncode == 1, _explain(result)
    assert result.stdout.count("HOOK-CALLED") == 1, _explain(result)
    assert result.stdout.count("ATEXIT-MARKER") == 1, _explain(result)
    assert "MeshFailure(mesh_name=doomed" in result.stderr, _explain(result)
    assert "boom from the script" in result.stderr, _explain(result)


# Fault point: the client's `supervise` control handler, wrapped to signal once the failures of
# both ranks reached the client. The hook's first call waits for that before raising, so the
# second failure is certainly there while the first is turning fatal.
_SECOND_FAULT_ARRIVED = """
from monarch._src.runtime.runtime import get_runtime

_control = get_runtime().mailbox.control
_supervise = _control["supervise"]
_arrived = []
_both_arrived = threading.Event()

def _counting_supervise(peer, args, reply):
    _supervise(peer, args, reply)
    _arrived.append(args)
    if len(_arrived) == 2:
        _both_arrived.set()

_control["supervise"] = _counting_supervise
WAIT_BEFORE_RAISING = lambda: _both_arrived.wait(30)
"""

@pytest.mark.timeout(120)
def test_raising_custom_fault_hook_with_two_pending_faults_is_called_once() -> None:
    result = _run("GPUS = 2", _SECOND_FAULT_ARRIVED, _RAISING_HOOK, _FAIL_AND_WAIT)
    assert result.returncode == 1, _explain(result)
    assert result.stdout.count("HOOK-CALLED") == 1, _explain(result)
    assert result.stdout.count("ATEXIT-MARKER") == 1, _explain(result)
