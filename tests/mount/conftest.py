"""Shared set-up of the mount tests: every test here mounts real FUSE file systems, so the
whole directory skips, saying why, where this host cannot."""

from __future__ import annotations

import pytest

from monarch._src.mount.fs import fuse_unavailable_reason

_REASON = fuse_unavailable_reason()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if _REASON is None:
        return
    for item in items:
        if "tests/mount/" in str(item.fspath) and "test_mount_errors" not in str(item.fspath):
            item.add_marker(pytest.mark.skip(
                reason=f"FUSE is unavailable here ({_REASON}); use sync_workspace instead"))
