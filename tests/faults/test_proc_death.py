"""A proc that dies under an in-flight call: `os._exit`, SIGKILL, SIGSEGV (§2.3, §4.33-34).

The caller's future must resolve with a `SupervisionError` naming the endpoint and the exit as
soon as the death is known; later calls to any mesh or slice containing the dead proc must fail at
once; everything else (actors on other procs, the proc mesh's `stop`, new procs) keeps working.
Every test kills a proc, so each spawns its own proc mesh and stops it in a `finally`.

A proc death is also a supervision event for the proc mesh's owner, here the client: its fault
hook (`fault_recorder`) receives a `MeshFailure` once the local host's child watch has recorded the
exit. Tests use that report as the point after which the death is known everywhere, instead of
sleeping.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, endpoint, this_host

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0
# How long to keep waiting for one more fault report once one has arrived. The reports of one
# death are all produced at once in this process, so a runtime that sends one needs milliseconds.
MORE_FAULTS_GRACE = 2.0

CRASHES = [
    pytest.param("exit_process", "exited with non-zero code 1", id="os_exit"),
    pytest.param("sigkill", "Killed(sig=9)", id="sigkill"),
    pytest.param("segfault", "Killed(sig=11)", id="sigsegv"),
]


class Crashy(Actor):
    """Endpoints that end their own process in different ways."""

    @endpoint
    def ping(self) -> int:
        return os.getpid()

    @endpoint
    def exit_process(self) -> None:
        os._exit(1)

    @endpoint
    def sigkill(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    @endpoint
    def segfault(self) -> None:
        ctypes.string_at(0)


@contextlib.contextmanager
def fresh_procs(gpus: int) -> Iterator[Any]:
    """A proc mesh of this test's own, stopped on the way out (stopping twice is fine)."""
    procs = this_host().spawn_procs(per_host={"gpus": gpus})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=TIMEOUT)


def _call_error(start: Any) -> SupervisionError:
    """The `SupervisionError` of a call, whether it is raised at the call site or by `get`."""
    with pytest.raises(SupervisionError) as info:
        start().get(timeout=TIMEOUT)
    return info.value


def _wait_for_text(recorder: Any, needle: str, grace: float) -> list[str]:
    """Wait for a recorded fault containing `needle`; `grace` bounds the wait for each new one."""
    count = 1
    while True:
        texts = recorder.wait_for(count, timeout=grace)
        if any(needle in text for text in texts):
            return texts
        count = len(texts) + 1


# --- what the caller, later callers and the owner see (§2.3, §2.4, §4.33-34) --------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("method", "status"), CRASHES)
def test_proc_crash_in_flight_call_raises_supervision_error_and_healthy_procs_keep_working(
    fault_recorder: Any, method: str, status: str
) -> None:
    with fresh_procs(2) as procs:
        crash = procs.spawn("crash", Crashy)
        bystander = procs.slice(gpus=0).spawn("bystander", Crashy)
        pids = list(crash.ping.call().get(timeout=TIMEOUT).values())
        assert bystander.ping.call_one().get(timeout=TIMEOUT) == pids[0]
        healthy_half = crash.slice(gpus=0)  # sliced before the crash

        in_flight = getattr(crash.slice(gpus=1), method).call_one()
        # A TimeoutError here would be a hang; the death is known within about a second.
        error = in_flight.exception(timeout=TIMEOUT)
        assert in_flight.done()
        assert isinstance(error, SupervisionError)
        assert str(error).startswith(f"Endpoint call crash.{method}() failed,"), str(error)
        assert status in str(error)

        # The owner of the proc mesh (the client) is told; from then on the death is known.
        reports = fault_recorder.wait_for(1)
        assert all("MeshFailure" in report for report in reports)
        assert any("crashed_ranks=[1]" in report and status in report for report in reports)

        # Later calls to anything containing global rank 1 fail at once, naming the exit.
        for start in (
            lambda: crash.ping.call(),
            lambda: crash.slice(gpus=1).ping.call_one(),
            lambda: crash.slice(gpus=slice(0, 2)).ping.call(),
            lambda: crash.flatten("rank").slice(rank=1).ping.call_one(),
        ):
            later = _call_error(start)
            assert str(later).startswith("Endpoint call crash.ping() failed,"), str(later)
            assert status in str(later)

        # Slices without rank 1, old or new, and actors on the surviving proc keep answering.
        assert healthy_half.ping.call_one().get(timeout=TIMEOUT) == pids[0]
        assert crash.slice(gpus=0).ping.call_one().get(timeout=TIMEOUT) == pids[0]
        assert bystander.ping.call_one().get(timeout=TIMEOUT) == pids[0]
        late = procs.slice(gpus=0).spawn("late", Crashy)
        assert late.ping.call_one().get(timeout=TIMEOUT) == pids[0]

        assert procs.stop().get(timeout=TIMEOUT) is None

    with fresh_procs(1) as again:
        new_pid = again.spawn("after_crash", Crashy).ping.call_one().get(timeout=TIMEOUT)
        assert new_pid not in pids
        assert new_pid != os.getpid()
    # Stopping procs, even a mesh with a dead proc, is not a failure.
    assert all(status in report for report in fault_recorder.texts)


@pytest.mark.timeout(120)
def test_proc_crash_every_rank_in_flight_call_raises_and_each_rank_is_reported(
    fault_recorder: Any,
) -> None:
    with fresh_procs(2) as procs:
        crash = procs.spawn("crash_all", Crashy)
        crash.ping.call().get(timeout=TIMEOUT)
        # Both procs exit: the gathered call must not wait for replies that never come.
        error = crash.exit_process.call().exception(timeout=TIMEOUT)
        assert isinstance(error, SupervisionError)
        assert str(error).startswith("Endpoint call crash_all.exit_process() failed,")
        assert "exited with non-zero code 1" in str(error)
        reports = fault_recorder.wait_for(2)
        assert all("exited with non-zero code 1" in report for report in reports)
        assert set(re.findall(r"crashed_ranks=\[(\d)\]", "".join(reports))) == {"0", "1"}
        assert procs.stop().get(timeout=TIMEOUT) is None


@pytest.mark.timeout(120)
def test_proc_crash_fault_report_names_actor_mesh_on_dead_proc(fault_recorder: Any) -> None:
    with fresh_procs(1) as procs:
        crash = procs.spawn("crash_reported", Crashy)
        crash.ping.call_one().get(timeout=TIMEOUT)
        crash.sigkill.call_one().exception(timeout=TIMEOUT)
        texts = _wait_for_text(fault_recorder, "mesh_name=crash_reported", MORE_FAULTS_GRACE)
        assert any("Killed(sig=9)" in text for text in texts)


def test_mesh_repr_html_shows_the_dead_rank(fault_recorder: Any) -> None:
    with fresh_procs(2) as procs:
        mesh = procs.spawn("drawn", Crashy)
        assert mesh.ping.call().get(timeout=30) is not None
        with pytest.raises(SupervisionError):
            mesh.slice(gpus=1).sigkill.call_one().get(timeout=30)
        fault_recorder.wait_for(1, timeout=30)
        html = mesh._repr_html_()
        assert "1 failed, 1 running" in html and "Killed(sig=9)" in html
        assert "1 failed" in procs._repr_html_()
