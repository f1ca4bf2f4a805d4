"""End to end: JupyterLab runs `tutorials/widgets.ipynb` and `tutorials/live_futures.ipynb` in
headless Chromium and draws the mesh and a call's live future.

The widget tests in `tests/notebook` check the traits a `MeshView` or `FutureView` sets; only a
browser shows that the frontend really renders them (the widget manager, the comm, the grid
layout). This test starts a JupyterLab server whose `python3` kernel is this interpreter, opens the
widgets tutorial in Debian's Chromium through Playwright, runs every cell but the last, waits for
the summary "2 running" and the two rank cells, then runs the last cell (which stops the procs)
and waits for "2 stopped". Then, in the same server and browser, it runs the live futures tutorial
and waits for the future shown as a cell's value to end at "3/4 done, 1 failed" with four rank
cells, the failed one carrying its error as its hover text. A screenshot of each state goes to
`tests/e2e/artifacts/`.

It skips when `/usr/bin/chromium` or the `playwright` package is missing (`make test` installs
both where apt is usable). Playwright's own browser download is not used: CI has no internet.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from monarch._src.hosts.addresses import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
# Without these a headless Chromium keeps trying to reach Google's services, which on a closed
# network means retries and timeouts. Playwright adds a fresh temporary profile itself.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Seconds to wait for the server to answer, for the kernel to start, and for the widgets to draw.
SERVER_TIMEOUT = 60.0
UI_TIMEOUT_MS = 90_000
# Seconds the server gets to shut its kernel down on SIGTERM before it is killed.
STOP_TIMEOUT = 20.0

if not CHROMIUM.exists():
    _MISSING: str | None = f"{CHROMIUM} is missing; install Debian's chromium (make test does)."
elif find_spec("playwright") is None:
    _MISSING = "The playwright package is not installed; pip install -e '.[dev]'."
else:
    _MISSING = None
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


def _jupyter_env(home: Path) -> dict[str, str]:
    """An environment whose Jupyter dirs are all under `home`, with `python3` as this interpreter.

    `JUPYTER_PATH` is searched before every other kernel dir, so a `python3` kernelspec of the
    user or the system cannot take the kernel out of this virtual environment.
    """
    kernel = home / "share" / "kernels" / "python3"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3",
                "language": "python",
            }
        )
    )
    settings = home / "lab-settings"
    # No "get Jupyter news?" toast over the notebook, and no request for news.
    notification = settings / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = dict(os.environ)
    env.update(
        JUPYTER_PATH=str(home / "share"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        IPYTHONDIR=str(home / "ipython"),
    )
    return env


def _wait_until_up(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode} before answering.\n"
                        f"{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)  # polling a server that is starting; there is no event to wait on
    pytest.fail(f"JupyterLab did not answer on {url} within {SERVER_TIMEOUT} s.\n{log.read_text()}")


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (the server shuts its kernels down), then SIGKILL it."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
    # The kernel and the procs it forked share the group; none may outlive the test.
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """The URL of a JupyterLab serving a copy of `tutorials/`, without token or password."""
    root = tmp_path / "tutorials"
    shutil.copytree(REPO / "tutorials", root)
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "jupyterlab.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                sys.executable, "-m", "jupyterlab",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                # `ServerApp.token` is the deprecated spelling of this.
                "--IdentityProvider.token=", "--ServerApp.password=",
                "--no-browser", f"--ServerApp.root_dir={root}",
                "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, to run commands
                # CI containers often run as root; this server listens on loopback only.
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],
            env=_jupyter_env(tmp_path / "jupyter"),
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group for the server, its kernel and procs
        )
    try:
        _wait_until_up(server, url, log)
        yield url
    finally:
        _stop(server)


def _run_command(page: Page, command: str, last_cell: bool, path: str | None = None) -> None:
    """Run a JupyterLab command on the open notebook (the one at `path`, if given: a reload
    restores the notebooks opened before, and the current one may be any of them), with its
    first or its last cell active.

    Through the app object (`--LabApp.expose_app_in_browser`) rather than clicks and keys: focus
    in a headless browser decides where a key goes, and the menus are built from the same
    commands anyway.
    """
    page.evaluate(
        """async ([command, last, path]) => {
            const app = window.jupyterapp;
            const panel = path === null
                ? app.shell.currentWidget
                : Array.from(app.shell.widgets("main")).find((w) => w.context?.path === path);
            if (!panel) {
                throw new Error(`No open notebook at ${path}.`);
            }
            // Commands run before the kernel has answered are silently dropped.
            await panel.sessionContext.ready;
            await panel.sessionContext.session.kernel.info;
            // The notebook commands act on the notebook tracker's current widget, which is the
            // last one that had focus; a headless page may never have focused it.
            app.shell.activateById(panel.id);
            const notebook = panel.content;
            notebook.activeCellIndex = last ? notebook.widgets.length - 1 : 0;
            if (!app.commands.isEnabled(command)) {
                throw new Error(`JupyterLab command ${command} is disabled.`);
            }
            return app.commands.execute(command);
        }""",
        [command, last_cell, path],
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_widget_tutorials_in_jupyterlab_render_mesh_view_and_live_future(lab: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(15_000)  # clicks and checks; waits on the kernel say more
            page.goto(f"{lab}/lab/tree/widgets.ipynb")
            notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            cells = notebook.locator(".jp-Notebook .jp-Cell")
            expect(cells.last).to_be_visible(timeout=UI_TIMEOUT_MS)

            # Everything but the last cell, which stops the procs: "2 running" must stay to be seen.
            _run_command(page, "notebook:run-all-above", last_cell=True)
            outputs = notebook.locator(".jp-OutputArea-output")
            running = outputs.locator(".widget-html-content", has_text=re.compile(r"^2 running$"))
            expect(running).to_be_visible(timeout=UI_TIMEOUT_MS)
            rank_cells = outputs.locator(".widget-gridbox .widget-html-content > div")
            expect(rank_cells).to_have_count(2)
            assert rank_cells.all_inner_texts() == ["0", "1"]
            expect(outputs.filter(has_text="procs up: 2/2")).to_have_count(1)
            expect(outputs.filter(has_text="{'running': 2}")).to_have_count(1)
            page.screenshot(path=str(ARTIFACTS / "widgets-running.png"), full_page=True)

            # The grid drawn by an earlier cell updates itself when the procs stop.
            _run_command(page, "notebook:run-cell", last_cell=True)
            stopped = outputs.locator(".widget-html-content", has_text=re.compile(r"^2 stopped$"))
            expect(stopped).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(running).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "widgets-stopped.png"), full_page=True)

            _live_future_renders(page, lab)
        finally:
            browser.close()


def _live_future_renders(page: Page, lab: str) -> None:
    """Run the live futures tutorial; its first call's widget ends at "3/4 done, 1 failed"."""
    from playwright.sync_api import expect

    page.goto(f"{lab}/lab/tree/live_futures.ipynb")
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    # The reload restores widgets.ipynb too: wait until this notebook is the one shown.
    title = notebook.get_by_role("heading", name="Live futures: watching a call over a mesh")
    expect(title).to_be_visible(timeout=UI_TIMEOUT_MS)
    _run_command(page, "notebook:run-all-cells", last_cell=True, path="live_futures.ipynb")
    outputs = notebook.locator(".jp-OutputArea-output")
    final = outputs.locator(
        ".widget-html-content", has_text=re.compile(r"^3/4 done, 1 failed, \d+\.\d s$")
    )
    expect(final).to_be_visible(timeout=UI_TIMEOUT_MS)
    first = outputs.locator(".widget-gridbox").first
    rank_cells = first.locator(".widget-html-content > div")
    expect(rank_cells).to_have_count(4)
    assert rank_cells.all_inner_texts() == ["0", "1", "2", "3"]
    expect(rank_cells.nth(3)).to_have_attribute("title", re.compile("rank 3 ran out of data"))
    expect(rank_cells.nth(0)).to_have_attribute("title", re.compile(r"done in \d+\.\d\d s"))
    # The cancelled call drawn by FutureView: rank 0 answered, the others were cancelled.
    expect(outputs.locator(".widget-html-content", has_text=re.compile(r"^1/4 done, 3 cancelled"))
           ).to_be_visible(timeout=UI_TIMEOUT_MS)
    first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "live-future.png"), full_page=True)
