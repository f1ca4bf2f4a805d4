"""The client's fault hook at the root of supervision (contract §2.4, §4.39).

A failure nobody handled reaches `monarch.actor.unhandled_fault_hook`. The default hook raises, and
a raising hook is fatal, as in torchmonarch 0.7.0: the report goes to stderr ("Unhandled monarch
error on the root actor, ...") and the main thread gets a `KeyboardInterrupt`; uncaught, it ends
the process (by SIGINT) after the atexit handlers ran; caught, the program carries on. That would
end pytest, so each case runs as a script in a subprocess and the test reads its exit status and
output. Markers printed by the script count what happened.
"""

from __future__ import annotations

import signal
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
threading.Event().wait(45)  # the fault interrupts this long before it returns
print("SURVIVED", flush=True)
"""

# The interrupted process ended by SIGINT, as an uncaught KeyboardInterrupt ends Python.
INTERRUPTED = -signal.SIGINT
HEADER = "Unhandled monarch error on the root actor, hostname="
REPORT = "The actor <root>.<__main__.Boom doomed{'gpus': 0/1}> and all its descendants have failed:"


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
def test_default_fault_hook_interrupts_main_thread_after_reporting_to_stderr() -> None:
    result = _run("GPUS = 1", _FAIL_AND_WAIT)
    assert result.returncode == INTERRUPTED, _explain(result)
    assert "SURVIVED" not in result.stdout, _explain(result)
    assert result.stdout.count("ATEXIT-MARKER") == 1, _explain(result)
    assert result.stderr.count(HEADER) == 1, _explain(result)
    assert REPORT in result.stderr and "boom from the script" in result.stderr, _explain(result)
    assert result.stderr.rstrip().endswith("KeyboardInterrupt"), _explain(result)


@pytest.mark.timeout(120)
def test_raising_custom_fault_hook_is_called_once_and_interrupts_main_thread() -> None:
    result = _run("GPUS = 1", "WAIT_BEFORE_RAISING = lambda: None", _RAISING_HOOK, _FAIL_AND_WAIT)
    assert result.returncode == INTERRUPTED, _explain(result)
    assert result.stdout.count("HOOK-CALLED") == 1, _explain(result)
    assert result.stdout.count("ATEXIT-MARKER") == 1, _explain(result)
    assert REPORT in result.stderr and "boom from the script" in result.stderr, _explain(result)


# Two ranks fail; the hook raises for each. The first fatal fault interrupts the main thread,
# which catches it and waits for the second: the hook's second call waits until the main thread
# has taken the first interrupt, so the two interrupts cannot merge into one signal.
_TWO_FATAL_FAULTS = """
first_interrupt = threading.Event()
calls = []

def hook(failure):
    calls.append(str(failure))
    print("HOOK-CALLED", flush=True)
    if len(calls) == 2:
        first_interrupt.wait(30)
    raise RuntimeError("the custom hook gives up")

monarch.actor.unhandled_fault_hook = hook
procs = this_host().spawn_procs(per_host={"gpus": 2})
mesh = procs.spawn("doomed", Boom)
mesh.ping.call().get(timeout=30)
mesh.boom.broadcast()
interrupts = 0
while interrupts < 2:
    try:
        if not threading.Event().wait(45):
            break
    except KeyboardInterrupt:
        interrupts += 1
        first_interrupt.set()
print(f"INTERRUPTS={interrupts}", flush=True)
"""


@pytest.mark.timeout(120)
def test_each_fatal_fault_calls_hook_once_and_a_program_that_catches_the_interrupt_carries_on(
) -> None:
    result = _run(_TWO_FATAL_FAULTS)
    assert result.returncode == 0, _explain(result)
    assert result.stdout.count("HOOK-CALLED") == 2, _explain(result)
    assert "INTERRUPTS=2" in result.stdout, _explain(result)
    assert result.stdout.count("ATEXIT-MARKER") == 1, _explain(result)
    assert result.stderr.count(HEADER) == 2, _explain(result)
