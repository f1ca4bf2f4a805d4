"""Tests here make in-process IPython shells; none may outlive its module, since monarch's
defaults differ under IPython (`enable_log_forwarding`) and later tests run in this process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def _no_ipython_shell_left() -> Iterator[None]:
    yield
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        return
    if InteractiveShell.initialized():
        InteractiveShell.clear_instance()
