"""`monarch.notebook.flush_logs` (run after every cell) reports a flush that failed or timed
out, instead of dropping it, and never raises into the notebook."""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

import pytest

from monarch._src.lowlevel import forget, register
from monarch.notebook import flush_logs

pytestmark = pytest.mark.timeout(30)


class _Agent:
    is_local = True

    def __init__(self, error: BaseException | None) -> None:
        self.error = error

    def flush_logs(self, tables: Any = None) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self.error is not None:
            done.set_exception(self.error)
        return done  # never done without an error: the flush times out


@pytest.mark.parametrize(("error", "reported"), [
    (RuntimeError("the host agent stopped"), "RuntimeError: the host agent stopped"),
    (None, "it did not finish within 0.05s"),
])
def test_a_failed_flush_is_reported_not_raised(
    error: BaseException | None, reported: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _Agent(error)
    register(agent)  # type: ignore[arg-type]  # only what flush_logs reads
    try:
        with caplog.at_level(logging.WARNING, logger="monarch.notebook"):
            flush_logs(timeout=0.05)
    finally:
        forget(agent)  # type: ignore[arg-type]
    assert f"the log flush failed ({reported})" in caplog.text
