"""Fixtures for the fault tests.

These tests make actors and procs fail on purpose. Each one installs `fault_recorder` around the
faults it expects, but the fault hook runs on a thread of its own, so a report can land after a
test's recorder was removed. With the default hook that report would end the pytest process
(`os._exit(1)`), so for the duration of this package a catch-all hook sits underneath the
per-test recorders and writes such stray reports to stderr instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="package", autouse=True)
def _stray_fault_guard() -> Iterator[None]:
    import monarch.actor

    def report_stray(failure: Any) -> None:
        sys.stderr.write(f"tests/faults: a fault arrived outside any recorder: {failure}\n")

    original = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = report_stray
    try:
        yield
    finally:
        monarch.actor.unhandled_fault_hook = original
