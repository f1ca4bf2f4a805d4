"""Fixtures for the fault tests.

These tests make actors and procs fail on purpose. Each one installs `fault_recorder` around the
faults it expects, but the fault hook runs on a thread of its own, so a report can land after a
test's recorder was removed. With the default hook that report would end the pytest process
(`os._exit(1)`), so for the duration of this package a catch-all hook sits underneath the
per-test recorders and writes such stray reports to stderr instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import guard_stray_faults


@pytest.fixture(scope="package", autouse=True)
def _stray_fault_guard() -> Iterator[None]:
    yield from guard_stray_faults("tests/faults")
