"""Shared fixtures for the test suite.

Worker processes are expensive on small CI machines, so the integration tests share two proc
meshes for the whole session (`procs4`, `procs2`). A test that stops, kills or otherwise damages
the procs it uses must spawn its own mesh instead of using these.

`monarch.actor` is imported inside the fixtures, never at module level: unit tests are collected
with this conftest too, and they must not depend on the runtime being importable.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Seconds a fixture waits for a proc mesh to stop before the teardown fails.
STOP_TIMEOUT = 30.0

# Everything the session's processes put in the temporary folder (procs' logs and sockets, job
# log folders, workspace caches, Dask's scratch space, tmux's sockets, the notebooks' kernels'
# files) goes to a folder of the session's own, removed when the session ends: this conftest is
# loaded before any test runs and before the notebooks' kernels start, so all of them inherit
# it. What still lands in the machine's temporary folder is listed at the end of the run.
_SYSTEM_TMP = tempfile.gettempdir()
_SYSTEM_TMP_BEFORE = set(os.listdir(_SYSTEM_TMP))
if os.environ.get("MONARCH_PROC"):
    # Imported by a proc that unpickled an actor class of a test module: no session here. A
    # proc started from its command's environment alone (`inherit_env = False`) has no session
    # folder to inherit, and one made here would outlive it (a proc ends without `atexit`).
    SESSION_TMP = _SYSTEM_TMP
else:
    SESSION_TMP = tempfile.mkdtemp(prefix="monarch-tests-")
    os.environ["TMPDIR"] = os.environ["TMUX_TMPDIR"] = SESSION_TMP
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    # Removed at exit, after the atexit handlers registered later (they run first): IPython's
    # test shell keeps its history database in a temporary folder and writes it at exit.
    atexit.register(shutil.rmtree, SESSION_TMP, True)
_ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionfinish(session: pytest.Session) -> None:
    # The notebooks' kernels run in tutorials/ and are shut down with `now=True` (killed): their
    # control servers' address files stay there until the next client sweeps them.
    tutorials_files = _ROOT / "tutorials" / ".monarch"
    if tutorials_files.is_dir():
        from monarch._src.admin.server import sweep_dead

        sweep_dead(str(tutorials_files))
        try:
            tutorials_files.rmdir()
        except OSError:
            pass  # a live client's file (or the user's) is still there


def pytest_terminal_summary(terminalreporter: Any) -> None:
    ours = os.path.basename(SESSION_TMP)
    left = sorted(set(os.listdir(_SYSTEM_TMP)) - _SYSTEM_TMP_BEFORE - {ours})
    if left:
        terminalreporter.write_line(
            f"left in {_SYSTEM_TMP} during the session (by the tests or another program): "
            + ", ".join(left))


def _spawn_shared_procs(gpus: int) -> Iterator[Any]:
    from monarch.actor import this_host

    procs = this_host().spawn_procs(per_host={"gpus": gpus})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


def guard_stray_faults(where: str) -> Iterator[None]:
    """Body of a package-scoped autouse fixture: a fault that reaches the client outside any
    test's own recorder is written to stderr instead of ending the run (the default hook exits)."""
    import monarch.actor

    def report_stray(failure: Any) -> None:
        sys.stderr.write(f"{where}: a fault arrived outside any recorder: {failure}\n")

    original = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = report_stray
    try:
        yield
    finally:
        monarch.actor.unhandled_fault_hook = original


@pytest.fixture(scope="session")
def procs4() -> Iterator[Any]:
    """A `{gpus: 4}` proc mesh shared by every test that leaves its procs running."""
    yield from _spawn_shared_procs(4)


@pytest.fixture(scope="session")
def procs2() -> Iterator[Any]:
    """A `{gpus: 2}` proc mesh shared by every test that leaves its procs running."""
    yield from _spawn_shared_procs(2)


class FaultRecorder:
    """Stands in for `monarch.actor.unhandled_fault_hook` and records every failure it gets.

    The hook may be called from any runtime thread, so the list is guarded by a condition that
    tests wait on instead of sleeping. `MeshFailure` is not picklable and may refer to runtime
    state, so both the object and its `str` (taken at call time) are kept.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # Failures in the order the hook saw them; only appended to.
        self._failures: list[Any] = []
        self._texts: list[str] = []

    def __call__(self, failure: Any) -> None:
        text = str(failure)
        with self._cond:
            self._failures.append(failure)
            self._texts.append(text)
            self._cond.notify_all()

    @property
    def failures(self) -> list[Any]:
        with self._cond:
            return list(self._failures)

    @property
    def texts(self) -> list[str]:
        with self._cond:
            return list(self._texts)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[str]:
        """Block until at least `count` failures arrived; returns their texts.

        Raises `TimeoutError` if fewer arrive within `timeout` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._texts) >= count, timeout=timeout):
                raise TimeoutError(
                    f"Expected {count} unhandled faults within {timeout}s, got {len(self._texts)}."
                )
            return list(self._texts)


@pytest.fixture
def fault_recorder() -> Iterator[FaultRecorder]:
    """Replaces `monarch.actor.unhandled_fault_hook` with a recorder for one test.

    The runtime looks the hook up on the module each time, so assigning the attribute is the
    documented way to override it. The original hook is restored even if the test fails.
    """
    import monarch.actor

    recorder = FaultRecorder()
    original = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = recorder
    try:
        yield recorder
    finally:
        monarch.actor.unhandled_fault_hook = original
