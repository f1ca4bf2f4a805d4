"""End to end: the Monarch Dashboard of a real job in headless Chromium, each view with two
failed actors drawn red, and the same page framed as the notebook widget draws it.

The job (`tests/dashboard/workload.py`) has two idle pingers, two actors failed by a handler's
exception and two stopped. For each view the test waits on the DOM (the poller's first
answer), checks what it shows (counts, the failed actors' rows and nodes, their computed
red), and saves a screenshot to `tests/e2e/artifacts/dashboard-*.png`. Then the hang-triage
panel, the py-spy button, and `monarch.notebook.dashboard(state)`'s frame.

It skips when `/usr/bin/chromium` or the `playwright` package is missing, as
`test_jupyterlab.py` does. The last test runs `tutorials/observability.ipynb` in JupyterLab
(that module's `lab` fixture) and docks its dashboard frame beside the notebook.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.dashboard.workload import dashboard_job, overview_ready, wait_for
from tests.e2e.test_jupyterlab import (  # noqa: F401  (lab: the JupyterLab fixture)
    _MISSING,
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    lab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.skipif(_MISSING is not None, reason=_MISSING or ""),
              pytest.mark.timeout(240)]

RED = "rgb(229, 72, 77)"  # style.css's --failed
UI_TIMEOUT_MS = 30_000
JUPYTER_UI_TIMEOUT_MS = 90_000  # a kernel starting and running the tutorial's cells


@pytest.fixture(scope="module")
def state() -> Iterator[Any]:
    with dashboard_job() as (_, state):
        assert overview_ready(wait_for(f"{state.dashboard_url}/api/dashboard/overview",
                                       overview_ready))
        yield state


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        yield page
    finally:
        page.close()
    assert not errors, f"the page raised: {errors}"


def _color(locator: Any, prop: str = "color") -> str:
    return str(locator.evaluate(f"e => getComputedStyle(e).{prop}"))


def test_overview_shows_counts_health_and_the_failed_actors_in_red(state: Any,
                                                                   page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{state.dashboard_url}/#/overview")
    errors = page.locator("#errors li.failed")
    expect(errors).to_have_count(2)
    expect(errors.first).to_contain_text("dashboard test failure")
    assert _color(errors.first.locator(".reason-head")) == RED
    assert sorted(re.findall(r"doomed\[\d\]", " ".join(errors.all_inner_texts()))) == [
        "doomed[0]", "doomed[1]"]
    failures = page.locator('.card[data-metric="failures"]')
    expect(failures).to_have_class(re.compile(r"\bfailed\b"))
    expect(failures.locator(".card-value")).to_have_text("2")
    assert _color(failures.locator(".card-value")) == RED
    expect(page.locator('.card[data-metric="actors"] .card-detail')).to_contain_text("6 workload")
    expect(page.locator("#actor-status .legend li.failed")).to_contain_text("Failed 2")
    expect(page.locator("#traffic .bars tr.has-failed th")).to_have_text("fail")
    expect(page.locator("#activity svg.chart path.line")).to_have_count(1)
    expect(page.locator("#health svg.gauge")).to_have_attribute("aria-label",
                                                                re.compile(r"health \d+"))
    expect(page.locator("#live")).to_contain_text("live")
    page.screenshot(path=str(ARTIFACTS / "dashboard-overview.png"), full_page=True)


def test_topology_draws_the_mesh_tree_with_failed_actors_red(state: Any, page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{state.dashboard_url}/#/topology")
    graph = page.locator("#topology-graph")
    failed = graph.locator("g.node.actor.failed")
    expect(failed).to_have_count(2)
    expect(graph.locator("g.node.actor.idle")).to_have_count(3)  # the pingers and the client
    expect(graph.locator("g.node.actor.stopped")).to_have_count(2)
    assert _color(failed.first.locator("rect").first, "stroke") == RED
    labels = graph.locator("g.node.mesh .node-label").all_text_contents()
    assert any(t.startswith("hosts") for t in labels) and any(t.startswith("trainers")
                                                              for t in labels)
    # The meshes above a failure are red too; the client's own meshes are hidden by default.
    expect(graph.locator("g.node.mesh.failed")).to_have_count(3)  # hosts, trainers, doomed
    assert not any(t.startswith("telemetry") for t in labels)
    # The client's calls to the pingers, drawn as dashed message edges.
    expect(graph.locator("path.flow").first).to_be_attached()
    page.screenshot(path=str(ARTIFACTS / "dashboard-topology.png"), full_page=True)
    page.locator("button.mode[data-mode=meshes]").click()
    expect(graph.locator("g.node.actor")).to_have_count(0)
    doomed = graph.locator("g.node.mesh.failed", has_text="doomed")
    expect(doomed.locator(".node-kind")).to_have_text(re.compile(r"2 actors · 2 failed"))
    page.screenshot(path=str(ARTIFACTS / "dashboard-topology-meshes.png"), full_page=True)

    page.locator("button.tab[data-tab=actors]").click()
    rows = page.locator("#actors-table tbody tr.failed")
    expect(rows).to_have_count(2)
    assert _color(rows.first.locator("td").first) == RED
    page.locator("#show-system").check()
    expect(page.locator("#actors-table tbody tr")).to_have_count(
        len(state.query_engine_client.query("SELECT id FROM actors")["rows"]))
    page.screenshot(path=str(ARTIFACTS / "dashboard-actors.png"), full_page=True)
    page.locator("button.tab[data-tab=meshes]").click()
    expect(page.locator("#meshes-table tbody tr.failed")).to_have_count(1)


def test_explorer_shows_a_failed_actor_its_history_and_messages(state: Any,
                                                                page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{state.dashboard_url}/#/overview")
    page.locator("#errors li.failed a").first.click()
    expect(page).to_have_url(re.compile(r"#/explorer/actor/\d+$"))
    title = page.locator("#entity-title")
    expect(title).to_contain_text(re.compile(r"Actor doomed\[\d\]"))
    expect(title).to_have_class(re.compile(r"\bfailed\b"))
    assert _color(title) == RED
    history = page.locator("#status-history > li")
    expect(history.last).to_have_class(re.compile(r"\bfailed\b"))
    expect(history.last).to_contain_text("dashboard test failure")
    expect(page.locator("#entity-detail tr.failed")).to_contain_text("fail")
    expect(page.locator("#entity-list a.entity.selected")).to_have_class(re.compile(r"\bfailed\b"))
    crumbs = page.locator("#breadcrumb a").all_text_contents()
    assert crumbs == ["hosts", "trainers", "doomed"]
    expect(page.locator("#entity-list")).not_to_contain_text("telemetry")
    page.locator("#explorer-system").check()
    expect(page.locator("#entity-list")).to_contain_text("telemetry")
    page.screenshot(path=str(ARTIFACTS / "dashboard-explorer.png"), full_page=True)

    # Its mesh, one click away; then a live actor's py-spy dump.
    page.locator("#entity-detail .props a").first.click()
    expect(page.locator("#entity-title")).to_contain_text("Mesh doomed")
    expect(page.locator("#entity-detail tbody tr.failed")).to_have_count(2)
    page.locator("#entity-list a.entity", has_text="[0] Idle").last.click()
    expect(page.locator("#entity-title")).to_contain_text("Actor pinger[0]")
    page.locator("#pyspy-button").click()
    expect(page.locator("#pyspy-out")).to_contain_text(
        re.compile(r"pid \d+|BinaryNotFound|Failed"), timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "dashboard-pyspy.png"), full_page=True)


def test_hang_triage_button_shows_the_grouped_ranks(state: Any, page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{state.dashboard_url}/#/overview")
    expect(page.locator("#errors li.failed")).to_have_count(2)
    page.locator("#why-button").click()
    body = page.locator("#why-body")
    expect(body.locator("#why-summary")).to_be_visible(timeout=60_000)
    expect(body).to_contain_text("pinger")
    failed = body.locator("ul.errors li.failed")
    expect(failed).to_have_count(2)
    assert _color(failed.first) == RED
    page.screenshot(path=str(ARTIFACTS / "dashboard-why.png"))


def test_hidden_page_pauses_polling(state: Any, page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{state.dashboard_url}/#/overview")
    expect(page.locator("#live")).to_contain_text("live")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.evaluate("""() => {
        Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
        document.dispatchEvent(new Event("visibilitychange"));
    }""")
    expect(page.locator("#live")).to_contain_text("paused")
    seen = len(requests)
    page.wait_for_timeout(5000)  # two and a half poll periods: nothing may be fetched
    assert len(requests) == seen, requests[seen:]
    page.evaluate("""() => {
        Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
        document.dispatchEvent(new Event("visibilitychange"));
    }""")
    expect(page.locator("#live")).to_contain_text("live")
    assert any("/api/dashboard/overview" in url for url in requests[seen:])


def test_notebook_widget_frames_the_live_dashboard(state: Any, page: Page) -> None:
    from playwright.sync_api import expect

    from monarch.notebook import dashboard

    widget = dashboard(state, view="topology", height=600)
    page.set_content(f"<html><body style='background:#fff'>{widget.value}</body></html>")
    frame = page.frame_locator("iframe[title='Monarch Dashboard']")
    expect(frame.locator("#topology-graph g.node.actor.failed")).to_have_count(2)
    expect(page.locator("a[target=_blank]")).to_have_text(f"{state.dashboard_url}/#/topology")
    page.screenshot(path=str(ARTIFACTS / "dashboard-notebook-frame.png"), full_page=True)


def _run_on_cell(page: Page, path: str, command: str, cell: int) -> None:
    """Run a JupyterLab command on the notebook at `path` with cell `cell` active (-1: last)."""
    page.evaluate(
        """async ([path, command, cell]) => {
            const app = window.jupyterapp;
            const panel = Array.from(app.shell.widgets("main"))
                .find((w) => w.context?.path === path);
            if (!panel) throw new Error(`No open notebook at ${path}.`);
            await panel.sessionContext.ready;
            await panel.sessionContext.session.kernel.info;
            app.shell.activateById(panel.id);
            const notebook = panel.content;
            notebook.activeCellIndex = cell < 0 ? notebook.widgets.length + cell : cell;
            if (!app.commands.isEnabled(command)) throw new Error(`${command} is disabled.`);
            return app.commands.execute(command);
        }""",
        [path, command, cell],
    )


@pytest.mark.slow
def test_observability_tutorial_docks_the_dashboard_beside_the_notebook(
        lab: str, browser: Browser) -> None:  # noqa: F811  (the fixture imported above)
    """The tutorial in JupyterLab: its `dashboard(state)` cell frames the live page, which
    shows the tutorial's two failed actors in red, and "Create New View for Cell Output"
    docks that frame as a pane beside the notebook."""
    from playwright.sync_api import expect

    path = "observability.ipynb"
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    try:
        page.set_default_timeout(15_000)
        page.goto(f"{lab}/lab/tree/{path}")
        notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        expect(notebook.locator(".jp-Notebook .jp-Cell").last).to_be_visible(
            timeout=JUPYTER_UI_TIMEOUT_MS)
        # Everything but the last cell, which kills the job.
        _run_on_cell(page, path, "notebook:run-all-above", -1)
        frame = notebook.frame_locator(
            ".jp-OutputArea-output iframe[title='Monarch Dashboard']")
        expect(frame.locator("#errors li.failed")).to_have_count(
            2, timeout=JUPYTER_UI_TIMEOUT_MS)
        assert _color(frame.locator("#errors li.failed .reason-head").first) == RED
        cells = notebook.locator(".jp-Notebook .jp-Cell")
        index = next(i for i, text in enumerate(cells.all_inner_texts())
                     if "dashboard(state" in text and "view=" in text)
        _run_on_cell(page, path, "notebook:create-output-view", index)
        docked = page.locator(".jp-LinkedOutputView iframe[title='Monarch Dashboard']")
        expect(docked).to_have_count(1)
        pane = page.frame_locator(".jp-LinkedOutputView iframe[title='Monarch Dashboard']")
        expect(pane.locator("#errors li.failed")).to_have_count(2,
                                                                timeout=JUPYTER_UI_TIMEOUT_MS)
        page.screenshot(path=str(ARTIFACTS / "dashboard-jupyterlab.png"))
        _run_on_cell(page, path, "notebook:run-cell", -1)  # job.kill()
    finally:
        page.close()
