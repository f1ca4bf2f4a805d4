"""Client lifecycle: shutdown_context, teardown at interpreter exit, the default fault hook, and
objects defined in `__main__`.

Whole-client behaviours run in a subprocess, because they end the client. Each subprocess tags
itself and its descendants with a unique environment marker, so the test can find every process
the client started (worker procs, host agents) and check that none outlives it; any that does is
killed in teardown so a failing test leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monarch._src.procstat import process_alive
from monarch.actor import Actor, endpoint, this_host

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="Process checks read /proc."),
]

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0
# A client script that has not exited by then is hung.
SCRIPT_TIMEOUT = 60.0
# How long processes of an exited client may take to go away (the contract allows 20 s).
GONE_DEADLINE = 20.0
REPO_ROOT = Path(__file__).resolve().parents[2]
# Not MONARCH_* or HYPERACTOR_*: those prefixes are read as configuration.
MARKER_VAR = "MESHTEST_CLIENT_MARKER"


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


def _marked_pids(marker: str) -> set[int]:
    needle = f"{MARKER_VAR}={marker}".encode()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:
            continue
        if needle in variables and process_alive(int(entry)):
            found.add(int(entry))
    return found


def _survivors(pids: set[int], marker: str | None) -> set[int]:
    """Polls until `pids` and every process carrying `marker` are gone.

    Returns the ones still alive when `GONE_DEADLINE` passes (empty on success).
    """
    deadline = time.monotonic() + GONE_DEADLINE
    pause = threading.Event()
    while True:
        alive = {pid for pid in pids if process_alive(pid)}
        if marker is not None:
            alive |= _marked_pids(marker)
        if not alive or time.monotonic() >= deadline:
            return alive
        pause.wait(0.05)


@pytest.fixture
def marker() -> Iterator[str]:
    """A marker unique to this test; processes carrying it are killed at teardown."""
    value = uuid.uuid4().hex
    yield value
    for pid in _marked_pids(value):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _run_client(tmp_path: Path, marker: str, source: str) -> tuple[int, str, str]:
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ)
    env[MARKER_VAR] = marker
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if part
    )
    # Files, not pipes: a leaked child holding a pipe open must not make the run look hung.
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        completed = subprocess.run(
            [sys.executable, str(script)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            timeout=SCRIPT_TIMEOUT,
        )
    return completed.returncode, out_path.read_text(), err_path.read_text()


def _printed_pids(stdout: str) -> set[int]:
    lines = [line for line in stdout.splitlines() if line.startswith("PIDS ")]
    assert len(lines) == 1, stdout
    return {int(word) for word in lines[0].split()[1:]}


SPAWN_TWO_PROCS = """
    import os
    from monarch.actor import Actor, endpoint, shutdown_context, this_host

    class Pid(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    pids = procs.spawn("pids", Pid).pid.call().get(timeout=30)
    print("PIDS", *pids.values(), flush=True)
"""


@pytest.mark.timeout(120)
def test_shutdown_context_twice_succeeds_and_leaves_no_process(tmp_path: Path, marker: str) -> None:
    source = (
        SPAWN_TWO_PROCS
        + """
    assert shutdown_context().get(timeout=30) is None
    assert shutdown_context().get(timeout=30) is None
    print("DONE", flush=True)
    """
    )
    returncode, stdout, stderr = _run_client(tmp_path, marker, source)
    assert returncode == 0, stderr
    assert "DONE" in stdout
    pids = _printed_pids(stdout)
    assert len(pids) == 2
    assert _survivors(pids, marker) == set()


@pytest.mark.timeout(120)
def test_client_exit_without_stop_leaves_no_process(tmp_path: Path, marker: str) -> None:
    returncode, stdout, stderr = _run_client(tmp_path, marker, SPAWN_TWO_PROCS)
    assert returncode == 0, stderr
    pids = _printed_pids(stdout)
    assert len(pids) == 2
    assert _survivors(pids, marker) == set()


@pytest.mark.timeout(120)
def test_main_module_classes_travel_by_value(tmp_path: Path, marker: str) -> None:
    source = """
    from monarch.actor import Actor, endpoint, this_host

    def triple(value: int) -> int:
        return value * 3

    class Box:
        def __init__(self, value: int) -> None:
            self.value = value

    class Tripler(Actor):
        @endpoint
        def apply(self, box: Box) -> Box:
            return Box(triple(box.value))

    procs = this_host().spawn_procs(per_host={"gpus": 1})
    result = procs.spawn("tripler", Tripler).apply.call_one(Box(14)).get(timeout=30)
    print("RESULT", type(result).__name__, result.value, flush=True)
    procs.stop().get(timeout=30)
    """
    returncode, stdout, stderr = _run_client(tmp_path, marker, source)
    assert returncode == 0, stderr
    assert "RESULT Box 42" in stdout
    assert _survivors(set(), marker) == set()


@pytest.mark.timeout(120)
def test_default_fault_hook_interrupts_the_main_thread_and_atexit_runs(
    tmp_path: Path, marker: str
) -> None:
    source = """
    import atexit
    import threading
    from monarch.actor import Actor, endpoint, this_host

    class Doomed(Actor):
        @endpoint
        def explode(self) -> None:
            raise RuntimeError("broadcast failure nobody handles")

        @endpoint
        def ok(self) -> str:
            return "ok"

    atexit.register(lambda: print("ATEXIT RAN", flush=True))
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    doomed = procs.spawn("doomed", Doomed)
    print("READY", doomed.ok.call_one().get(timeout=30), flush=True)
    # No reply port: the exception kills the actor and, unhandled, reaches the default hook.
    doomed.explode.broadcast()
    threading.Event().wait(60)
    print("NOT INTERRUPTED", flush=True)
    """
    returncode, stdout, stderr = _run_client(tmp_path, marker, source)
    assert "READY ok" in stdout
    # As in torchmonarch: the report, then a KeyboardInterrupt in the main thread, which ends
    # the program (by SIGINT) after its atexit handlers ran.
    assert returncode == -signal.SIGINT, stderr
    assert "ATEXIT RAN" in stdout
    assert "NOT INTERRUPTED" not in stdout
    assert "Unhandled monarch error on the root actor, hostname=" in stderr
    assert "broadcast failure nobody handles" in stderr
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert _survivors(set(), marker) == set()


async def test_proc_mesh_async_with_stops_procs_on_exit(fault_recorder: Any) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    async with procs:
        pid = await procs.spawn("life_async_with", Pid).pid.call_one()
        assert process_alive(pid)
    assert _survivors({pid}, None) == set()
    # The error may come from spawn itself or, since spawn does not block, from initialized.
    with pytest.raises(RuntimeError, match="`ProcMesh` has already been stopped"):
        late = procs.spawn("life_after_async_with", Pid)
        await late.initialized
    with pytest.raises(RuntimeError):
        async with procs:
            pass
