"""Progress reports in a notebook: the `ProgressBar` renderer in this process, and procs coming
up in a real kernel, where the bar must appear in the cell that waits on them.

The procs run a bootstrap that waits for a file, so they cannot be up before the report is
shown (after the `progress` delay): the tests wait on the report, then let the procs come up.
"""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.kernel import run_cell as _run_cell

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _gate(path: str) -> Any:
    """A bootstrap that returns once `path` exists (runs in each proc)."""

    def wait() -> None:
        while not os.path.exists(path):
            time.sleep(0.02)  # polling in the proc, not in the test

    return wait


def test_progress_bar_renderer_follows_the_report_to_its_total() -> None:
    from monarch._src.lowlevel import Progress
    from monarch.notebook.progress_widget import ProgressBar

    bar = ProgressBar()
    with Progress("workspace app", 3 << 20, "B", renderer=bar) as progress:
        assert (bar.bar.value, bar.bar.max) == (0, 3 << 20)
        assert bar.label.value == "workspace app: 0 B/3.0 MiB"
        progress.advance(1 << 20)
        assert bar.bar.value == 1 << 20
        assert bar.label.value == "workspace app: 1.0 MiB/3.0 MiB"
        progress.advance(2 << 20)
    assert (bar.bar.value, bar.bar.max) == (3 << 20, 3 << 20)
    assert bar.bar.bar_style == "success"
    assert bar.label.value.startswith("workspace app: 3.0 MiB/3.0 MiB done in ")

    failed = ProgressBar()
    with pytest.raises(RuntimeError):
        with Progress("procs up", 2, renderer=failed) as progress:
            progress.update(1)
            raise RuntimeError("proc 1 died")
    assert failed.bar.bar_style == "danger"
    assert failed.label.value == "procs up: 1/2 failed: proc 1 died"
    failed.close()
    bar.close()


def test_waiting_on_procs_feeds_the_installed_widget_renderer_up_to_the_total(
    tmp_path: Path,
) -> None:
    import threading

    from monarch._src.lowlevel import set_renderer_factory
    from monarch.actor import this_host
    from monarch.config import configured
    from monarch.notebook.progress_widget import ProgressBar

    shown = threading.Event()

    class Spy(ProgressBar):  # type: ignore[misc]  # ProgressBar derives from untyped HBox
        def show(self, state: Any) -> None:
            super().show(state)
            shown.set()

    bars: list[Any] = []
    gate = tmp_path / "go"
    previous = set_renderer_factory(lambda: bars.append(Spy()) or bars[-1])
    try:
        with configured(progress="auto"):
            procs = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=_gate(str(gate)))
            ready = procs.initialized
            assert shown.wait(30)  # after the 0.5 s delay, procs still held by the gate
            (bar,) = bars
            assert (bar.bar.value, bar.bar.max, bar.label.value) == (0, 2, "procs up: 0/2")
            gate.touch()
            assert ready.get(timeout=60) is True
        assert (bar.bar.value, bar.bar.max, bar.bar.bar_style) == (2, 2, "success")
        assert bar.label.value.startswith("procs up: 2/2 ready in ")
        procs.stop().get(timeout=60)
    finally:
        set_renderer_factory(previous)
        for bar in bars:
            bar.close()


# ---- through a real kernel ----------------------------------------------------------------

_CELL = """
import os, threading, time
import monarch.actor
from monarch.actor import this_host
from monarch._src.lowlevel import set_renderer_factory
from monarch.notebook.progress import CellRenderer

gate = {gate!r}
shown = threading.Event()

class Spy(CellRenderer):
    def show(self, state):
        super().show(state)
        shown.set()

installed = set_renderer_factory(Spy)  # monarch.notebook's, put there by importing monarch.actor
assert type(installed()) is CellRenderer, installed

def wait_for_gate():
    while not os.path.exists(gate):
        time.sleep(0.02)

procs = this_host().spawn_procs(per_host={{"gpus": 2}}, bootstrap=wait_for_gate)
ready = procs.initialized
assert shown.wait(30)
open(gate, "w").close()
ready.get(timeout=60)
"""


def test_procs_coming_up_show_a_bar_in_the_waiting_cell(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("MONARCH_PROGRESS", None)  # the default, "auto", as a user has it
    manager, client = start_new_kernel(
        kernel_name="python3", cwd=str(REPO), env=env, startup_timeout=60
    )
    try:
        cell = _run_cell(client, textwrap.dedent(_CELL.format(gate=str(tmp_path / "go"))))
        displays = [m for m in cell if m["msg_type"] == "display_data"]
        assert any(
            "application/vnd.jupyter.widget-view+json" in m["content"]["data"] for m in displays
        ), [m["msg_type"] for m in cell]
        states = [m["content"]["data"].get("state", {}) for m in cell
                  if m["msg_type"] in ("comm_open", "comm_msg")]
        assert any(s.get("value") == 2 for s in states), states
        assert any(s.get("bar_style") == "success" for s in states), states
        assert any(str(s.get("value", "")).startswith("procs up: 2/2 ready in ")
                   for s in states), states
        _run_cell(client, "procs.stop().get(timeout=60)")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_terminal_ipython_keeps_the_terminal_line_and_imports_no_widgets() -> None:
    import subprocess
    import sys

    code = ("import sys, monarch.actor; from monarch._src.lowlevel import set_renderer_factory; "
            "factory = set_renderer_factory(None); set_renderer_factory(factory); "
            "print(type(factory()).__name__, factory.__module__, 'ipywidgets' in sys.modules)")
    ipython = Path(sys.executable).with_name("ipython")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([str(ipython), "--quick", "--no-banner", "-c", code], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split()[-3:] == ["TerminalRenderer", "monarch.notebook.progress", "False"]
