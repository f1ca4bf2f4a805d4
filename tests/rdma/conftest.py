"""Fixtures for the RDMA tests.

Actors used by several tests live in `actors.py` (importable by the procs). Fault tests here kill
procs on purpose; their reports reach the client's fault hook on a thread of its own, possibly
after a test ended, so a catch-all hook sits underneath for the whole package (as in
tests/faults) and writes stray reports to stderr instead of ending pytest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import guard_stray_faults


@pytest.fixture(scope="package", autouse=True)
def _stray_fault_guard() -> Iterator[None]:
    yield from guard_stray_faults("tests/rdma")


@pytest.fixture
def force_plane(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Call with a plane name to force it in this process (and in procs spawned afterwards)."""

    def force(plane: str | None) -> None:
        if plane is None:
            monkeypatch.delenv("MONARCH_RDMA_FORCE_PLANE", raising=False)
        else:
            monkeypatch.setenv("MONARCH_RDMA_FORCE_PLANE", plane)

    return force
