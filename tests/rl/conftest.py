"""A fault report that reaches the client outside any test's own recorder (an actor of an RL
test failing after its test ended) goes to stderr instead of ending the pytest run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import guard_stray_faults


@pytest.fixture(scope="package", autouse=True)
def _stray_fault_guard() -> Iterator[None]:
    yield from guard_stray_faults("tests/rl")
