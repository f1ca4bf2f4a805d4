"""Proc meshes shared by the tensor-engine tests (spawning procs is the slow part).

`mesh2` is a `{gpus: 2}` proc mesh, `mesh4` a `{hosts: 2, gpus: 2}` one. Tests that damage
their procs must spawn their own.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

STOP_TIMEOUT = 30.0

# The tensor engine needs torch (the `torch` extra); without it these tests are not collected.
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def mesh2() -> Iterator[Any]:
    """A `{gpus: 2}` proc mesh for tensor-engine tests."""
    from monarch.actor import this_host

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


@pytest.fixture(scope="session")
def mesh4() -> Iterator[Any]:
    """A `{hosts: 2, gpus: 2}` proc mesh for reductions over some dimensions."""
    from monarch.actor import this_host

    procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)
