"""`monarch.notebook.dashboard`: the frame widget's markup and its refusals (no job needed;
the frame drawn in Chromium and in JupyterLab is tests/e2e/test_dashboard.py)."""

from __future__ import annotations

import html
import re

import pytest

from monarch.job import JobState
from monarch.notebook import dashboard

pytestmark = pytest.mark.timeout(60)


def test_dashboard_frames_the_view_of_a_url() -> None:
    widget = dashboard("http://localhost:8265/", view="explorer", height=500)
    frame = re.search(r'<iframe src="([^"]+)"[^>]*style="[^"]*height:500px', widget.value)
    assert frame and html.unescape(frame.group(1)) == "http://localhost:8265/#/explorer"
    assert "monarch-dashboard" in widget._dom_classes


def test_dashboard_of_a_state_without_one_says_how_to_enable_it() -> None:
    with pytest.raises(ValueError, match=r"include_dashboard=True"):
        dashboard(JobState({}))
    state = JobState({})
    state.dashboard_url = "http://localhost:1"
    assert 'src="http://localhost:1/#/overview"' in dashboard(state).value


@pytest.mark.parametrize("kwargs,match", [
    ({"view": "tree"}, "the views are overview, topology, explorer"),
    ({"height": 10}, "height"), ({"height": True}, "height"),
])
def test_dashboard_refuses_unknown_views_and_heights(kwargs: dict[str, object],
                                                     match: str) -> None:
    with pytest.raises(ValueError, match=match):
        dashboard("http://localhost:1", **kwargs)  # type: ignore[arg-type]


def test_dashboard_refuses_what_is_not_a_url() -> None:
    with pytest.raises(ValueError, match="http"):
        dashboard("javascript:alert(1)")
