"""Orphans: the procs and the fork-server zygote of a controller that is gone (contract §2.4).

"Client death: procs spawned by that client exit after `mesh_orphan_timeout`." Each case runs a
controller script in a subprocess that spawns four procs on `this_host()` and reports, through a
pipe of its own, its pid, the procs' pids and the zygote's pid (the parent of the procs, read from
field 4 of `/proc/<pid>/stat`). The test then ends the controller, by SIGKILL or by letting it
exit without stopping its procs, and checks that the procs and the zygote are gone within
`mesh_orphan_timeout` (set to `ORPHAN_TIMEOUT` through HYPERACTOR_MESH_ORPHAN_TIMEOUT) plus
`SLACK`, counted from the controller's end. Zombies count as gone (see `process_exit`).

The zygote can die too (SIGKILL while its controller lives): its procs must exit at once (each
asked the kernel for SIGKILL on its parent's death), calls to them must fail, and the controller,
as their owner, must be told of each death and still be able to spawn procs.

Every process of a case carries an environment marker unique to the test (procs inherit the
controller's environment), so the test also checks that it knows every process the controller
started, and SIGKILLs whatever still carries the marker at teardown.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.faults.process_exit import ProcessRef, kill_all, marked_pids, wait_until_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="Process checks read /proc."),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
# mesh_orphan_timeout of the controllers started here, as a duration string and in seconds.
ORPHAN_TIMEOUT = "5s"
ORPHAN_TIMEOUT_S = 5.0
# Allowance on top of a bound for the kernel and a loaded machine.
SLACK = 2.0
# Bound on a controller reaching a report (imports, spawning procs): a hang fails the test.
REPORT_TIMEOUT = 60.0
# Bound on a controller that ends by itself.
EXIT_TIMEOUT = 60.0
# Not MONARCH_* or HYPERACTOR_*: those prefixes are read as configuration.
MARKER_VAR = "MONARCHTEST_ORPHAN_MARKER"
REPORT_FD_VAR = "MONARCHTEST_REPORT_FD"
PROCS = 4
# process_exit_timeout of the controller whose zygote is killed (default 10s), and in seconds:
# how long `stop()` may wait for a proc to exit before killing it, and again after the kill.
PROCESS_EXIT_TIMEOUT = "3s"
PROCESS_EXIT_TIMEOUT_S = 3.0

# Spawns PROCS procs with one `Pids` actor each and builds `report`; the parts below extend it,
# `_REPORT` sends it, and one of `ENDINGS` decides how the controller ends.
_SPAWN = f"""
import json
import os
import select
import sys
import threading

import monarch.actor
from monarch._src.procstat import process_state
from monarch.actor import Actor, endpoint, this_host
from monarch.config import get_global_config

report_fd = int(os.environ.pop("{REPORT_FD_VAR}"))


def send(obj):
    os.write(report_fd, (json.dumps(obj) + "\\n").encode())


def parent_of(pid):
    return process_state(pid).ppid


class Pids(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def spawn_nested(self, count: int) -> list:
        # Procs of this proc's own, through its own local host agent and zygote; never stopped.
        self.nested = this_host().spawn_procs(per_host={{"gpus": count}})
        pids = self.nested.spawn("nested_pids", Pids).pid.call().get(timeout=60)
        return list(pids.values())


procs = this_host().spawn_procs(per_host={{"gpus": {PROCS}}})
pids_mesh = procs.spawn("orphan_pids", Pids)
proc_pids = list(pids_mesh.pid.call().get(timeout=60).values())
report = {{
    "controller": os.getpid(),
    "procs": proc_pids,
    "zygotes": sorted({{parent_of(pid) for pid in proc_pids}}),
    "orphan_timeout": get_global_config()["mesh_orphan_timeout"],
    "nested_procs": [],
    "nested_zygotes": [],
    "fd_holder": None,
}}
"""

# An actor on proc 0 spawns two procs of its own: their zygote is a child of proc 0.
_NESTED = """
nested = pids_mesh.slice(gpus=0).spawn_nested.call_one(2).get(timeout=60)
report["nested_procs"] = nested
report["nested_zygotes"] = sorted({parent_of(pid) for pid in nested})
"""

# A forked child that outlives the controller, as a worker started with multiprocessing's "fork"
# method would: it holds a copy of every descriptor the controller had, the write end of the
# zygote's stdin and the controller's sockets included, and does nothing with them.
_FD_HOLDER = """
holder = os.fork()
if holder == 0:
    select.select([], [], [], 90)
    os._exit(0)
report["fd_holder"] = holder
"""

_REPORT = """
send(report)
"""

ENDINGS = {
    "wait_to_be_killed": "threading.Event().wait(90)\nprint('NOT KILLED', flush=True)\n",
    "return": "print('RETURNING', flush=True)\n",
    "raise": "raise RuntimeError('the controller script fails without stopping its procs')\n",
    "os_exit": "sys.stdout.flush()\nos._exit(0)\n",
}

# Before the report: a fault hook that records what reaches the root of supervision.
_RECORD_FAULTS = """
faults = []
faults_arrived = threading.Condition()


def record_fault(failure):
    with faults_arrived:
        faults.append(str(failure))
        faults_arrived.notify_all()


monarch.actor.unhandled_fault_hook = record_fault
"""

# After the report: once the test has killed the zygote and seen its procs end, it writes a line
# to stdin; the controller then reports what it saw of the deaths, and whether it can spawn again.
_AFTER_ZYGOTE_DEATH = f"""
import time

from monarch._src.supervision.errors import SupervisionError

sys.stdin.readline()
outcome = {{}}
with faults_arrived:
    faults_arrived.wait_for(lambda: len(faults) >= {PROCS}, timeout={SLACK + 3.0})
    outcome["faults"] = list(faults)
try:  # a rank known to have failed fails the call at once, or its future does
    error = pids_mesh.pid.call().exception(timeout=30)
except SupervisionError as exc:
    error = exc
outcome["call_error"] = None if error is None else f"{{type(error).__name__}}: {{error}}"
outcome["call_error_is_supervision"] = isinstance(error, SupervisionError)
try:
    again = this_host().spawn_procs(per_host={{"gpus": 1}})
    outcome["respawned_pid"] = again.spawn("again", Pids).pid.call_one().get(timeout=30)
    outcome["respawn_error"] = None
except Exception as exc:
    outcome["respawned_pid"] = None
    outcome["respawn_error"] = f"{{type(exc).__name__}}: {{exc}}"
stop_started = time.monotonic()
stopped = procs.stop().exception(timeout=60)
outcome["stop_s"] = time.monotonic() - stop_started
outcome["stop_error"] = None if stopped is None else repr(stopped)
send(outcome)
"""


@dataclass
class Controller:
    """A controller script running in a subprocess, the pipe it reports on, and its first report.

    The script writes one JSON line to the pipe per stage (see `send` in `_SPAWN`).
    """

    popen: subprocess.Popen[bytes]
    report_fd: int  # read end of the report pipe; closed by `close`
    out_path: Path
    err_path: Path
    report: dict[str, Any] = field(default_factory=dict)  # empty until the first report
    _unread: bytes = b""  # bytes read from the pipe past the last complete line

    def read_report(self, timeout: float = REPORT_TIMEOUT) -> dict[str, Any]:
        """The next line on the report pipe, parsed; fails if none comes within `timeout` s."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._unread:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"No report within {timeout}s.\n{self.explain()}")
            ready, _, _ = select.select([self.report_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.report_fd, 65536)
            if not chunk:
                self.popen.wait(timeout=EXIT_TIMEOUT)
                raise AssertionError(f"The controller ended before reporting.\n{self.explain()}")
            self._unread += chunk
        line, self._unread = self._unread.split(b"\n", 1)
        report: dict[str, Any] = json.loads(line)
        return report

    def refs(self) -> dict[str, list[ProcessRef]]:
        """Every reported process other than the controller, by role, as running right now."""
        return {
            role: [ProcessRef.of(pid) for pid in self.report[role]]
            for role in ("procs", "zygotes", "nested_procs", "nested_zygotes")
        }

    def explain(self) -> str:
        return (
            f"report: {self.report}\nstatus: {self.popen.poll()}\n"
            f"stdout:\n{self.out_path.read_text()}\nstderr:\n{self.err_path.read_text()}"
        )

    def close(self) -> None:
        """Kill the controller if it still runs, reap it and close the pipes to it."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        if self.popen.stdin is not None:
            self.popen.stdin.close()
        os.close(self.report_fd)


@pytest.fixture
def marker() -> Iterator[str]:
    """A marker unique to this test; processes carrying it are SIGKILLed at teardown."""
    value = uuid.uuid4().hex
    yield value
    kill_all(marked_pids(MARKER_VAR, value))


def _start_controller(
    tmp_path: Path, marker: str, *parts: str, env_extra: dict[str, str] | None = None
) -> Controller:
    """Run the script made of `parts` (with `env_extra` set) and wait for its first report."""
    script = tmp_path / "controller.py"
    script.write_text("\n".join(textwrap.dedent(part) for part in parts))
    report_r, report_w = os.pipe()
    env = dict(os.environ)
    env.update({
        MARKER_VAR: marker,
        REPORT_FD_VAR: str(report_w),
        "HYPERACTOR_MESH_ORPHAN_TIMEOUT": ORPHAN_TIMEOUT,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p),
        **(env_extra or {}),
    })
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    # Files, not pipes: procs inherit the controller's stdout and stderr, and a leaked one
    # holding a pipe open must not make reading the output hang.
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        popen = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err,
            pass_fds=(report_w,),
        )
    os.close(report_w)
    controller = Controller(popen, report_r, out_path, err_path)
    try:
        controller.report = controller.read_report()
    except BaseException:
        controller.close()
        raise
    return controller


def _check_known_processes(controller: Controller, marker: str) -> list[ProcessRef]:
    """Check what the controller reported; returns every process that must go away with it."""
    report = controller.report
    assert report["orphan_timeout"] == ORPHAN_TIMEOUT, controller.explain()
    refs = controller.refs()
    assert len(refs["procs"]) == PROCS, controller.explain()
    # One zygote, the parent of every proc and a child of the controller.
    assert len(refs["zygotes"]) == 1, controller.explain()
    assert refs["zygotes"][0].ppid == report["controller"], controller.explain()
    for nested_zygote in refs["nested_zygotes"]:
        assert nested_zygote.ppid == report["procs"][0], controller.explain()
    everything = [ref for role in refs.values() for ref in role]
    # Nothing else carries the marker: the test knows every process the controller started.
    known = {ref.pid for ref in everything} | {report["controller"]}
    if report["fd_holder"] is not None:
        known.add(report["fd_holder"])
    assert {ref.pid for ref in marked_pids(MARKER_VAR, marker)} == known, controller.explain()
    return everything


def _assert_gone_by(
    refs: list[ProcessRef], since: float, bound: float, what: str, controller: Controller
) -> None:
    left = wait_until_gone(refs, max(0.0, since + bound - time.monotonic()))
    assert not left, (
        f"Processes still running {bound}s after {what}: "
        f"{[(ref.pid, ref.ppid) for ref in left]}.\n{controller.explain()}"
    )


def _kill_controller_and_check(controller: Controller, marker: str) -> None:
    refs = _check_known_processes(controller, marker)
    try:
        assert controller.popen.poll() is None, controller.explain()
        killed_at = time.monotonic()
        os.kill(controller.report["controller"], signal.SIGKILL)
        assert controller.popen.wait(timeout=EXIT_TIMEOUT) == -signal.SIGKILL
        _assert_gone_by(
            refs, killed_at, ORPHAN_TIMEOUT_S + SLACK, "the controller was killed", controller
        )
    finally:
        controller.close()
        kill_all(refs)


# --- the controller is SIGKILLed ----------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "extra", [pytest.param("", id="procs"), pytest.param(_NESTED, id="nested_procs")]
)
def test_orphans_controller_sigkilled_procs_and_zygotes_exit_within_orphan_timeout(
    tmp_path: Path, marker: str, extra: str
) -> None:
    controller = _start_controller(
        tmp_path, marker, _SPAWN, extra, _REPORT, ENDINGS["wait_to_be_killed"]
    )
    _kill_controller_and_check(controller, marker)


@pytest.mark.timeout(120)
def test_orphans_controller_sigkilled_with_forked_child_alive_procs_exit_within_orphan_timeout(
    tmp_path: Path, marker: str
) -> None:
    controller = _start_controller(
        tmp_path, marker, _SPAWN, _FD_HOLDER, _REPORT, ENDINGS["wait_to_be_killed"]
    )
    _kill_controller_and_check(controller, marker)


# --- the controller exits without stopping its procs --------------------------------------------


def _running(pids: list[int]) -> list[ProcessRef]:
    """The processes among `pids` that still run (one that already exited is left out)."""
    refs = []
    for pid in pids:
        try:
            refs.append(ProcessRef.of(pid))
        except ProcessLookupError:
            pass
    return refs


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("ending", "status"), [("return", 0), ("raise", 1), ("os_exit", 0)])
def test_orphans_controller_exits_without_stopping_procs_leaves_no_process(
    tmp_path: Path, marker: str, ending: str, status: int
) -> None:
    controller = _start_controller(tmp_path, marker, _SPAWN, _REPORT, ENDINGS[ending])
    # The controller may already be on its way out: a process gone before this look is gone.
    refs = _running(controller.report["procs"] + controller.report["zygotes"])
    try:
        assert controller.popen.wait(timeout=EXIT_TIMEOUT) == status, controller.explain()
        exited_at = time.monotonic()
        _assert_gone_by(
            refs, exited_at, ORPHAN_TIMEOUT_S + SLACK, "the controller exited", controller
        )
        assert not marked_pids(MARKER_VAR, marker), controller.explain()
    finally:
        controller.close()
        kill_all(refs)


# --- the zygote is SIGKILLed under a live controller --------------------------------------------


@dataclass
class ZygoteDeath:
    """What one controller saw after the test SIGKILLed its zygote."""

    controller: Controller
    left_after_kill: list[ProcessRef]  # procs and zygote still running SLACK s after the kill
    outcome: dict[str, Any]  # the controller's second report (see `_AFTER_ZYGOTE_DEATH`)
    left_after_exit: list[ProcessRef]  # marked processes still running after the controller


@pytest.fixture(scope="module")
def zygote_death(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZygoteDeath]:
    """One controller whose zygote the test SIGKILLs; the tests below read what followed."""
    marker = uuid.uuid4().hex
    controller = _start_controller(
        tmp_path_factory.mktemp("zygote_death"), marker,
        _SPAWN, _RECORD_FAULTS, _REPORT, _AFTER_ZYGOTE_DEATH,
        env_extra={"HYPERACTOR_PROCESS_EXIT_TIMEOUT": PROCESS_EXIT_TIMEOUT},
    )
    refs: list[ProcessRef] = []
    try:
        refs = _check_known_processes(controller, marker)
        killed_at = time.monotonic()
        os.kill(controller.report["zygotes"][0], signal.SIGKILL)
        left_after_kill = wait_until_gone(refs, max(0.0, killed_at + SLACK - time.monotonic()))
        assert controller.popen.stdin is not None
        controller.popen.stdin.write(b"go\n")
        controller.popen.stdin.flush()
        outcome = controller.read_report()
        assert controller.popen.wait(timeout=EXIT_TIMEOUT) == 0, controller.explain()
        left_after_exit = wait_until_gone(marked_pids(MARKER_VAR, marker), ORPHAN_TIMEOUT_S + SLACK)
        yield ZygoteDeath(controller, left_after_kill, outcome, left_after_exit)
    finally:
        controller.close()
        kill_all(refs)
        kill_all(marked_pids(MARKER_VAR, marker))


@pytest.mark.timeout(120)
def test_orphans_zygote_sigkilled_procs_exit_at_once_and_calls_to_them_fail(
    zygote_death: ZygoteDeath,
) -> None:
    explain = zygote_death.controller.explain()
    outcome = zygote_death.outcome
    assert not zygote_death.left_after_kill, (zygote_death.left_after_kill, explain)
    assert outcome["call_error_is_supervision"], (outcome, explain)
    assert outcome["stop_error"] is None, (outcome, explain)
    assert not zygote_death.left_after_exit, (zygote_death.left_after_exit, explain)


@pytest.mark.timeout(120)
def test_orphans_zygote_sigkilled_owner_is_told_of_each_dead_proc(
    zygote_death: ZygoteDeath,
) -> None:
    faults = zygote_death.outcome["faults"]
    for rank in range(PROCS):
        assert any(f"crashed_ranks=[{rank}]" in text for text in faults), (
            zygote_death.outcome, zygote_death.controller.explain()
        )


@pytest.mark.timeout(120)
def test_orphans_zygote_sigkilled_controller_spawns_procs_again(
    zygote_death: ZygoteDeath,
) -> None:
    outcome = zygote_death.outcome
    assert outcome["respawn_error"] is None, (outcome, zygote_death.controller.explain())
    assert isinstance(outcome["respawned_pid"], int)


@pytest.mark.timeout(120)
def test_orphans_zygote_sigkilled_stop_of_dead_procs_does_not_wait_out_exit_timeout(
    zygote_death: ZygoteDeath,
) -> None:
    outcome = zygote_death.outcome
    assert outcome["stop_s"] < PROCESS_EXIT_TIMEOUT_S, (outcome, zygote_death.controller.explain())
