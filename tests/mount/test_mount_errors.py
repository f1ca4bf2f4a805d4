"""What the mounts say where they cannot work (no process, no mount)."""

from __future__ import annotations

import pytest

from monarch._src.mount.fs import fuse_error
from monarch.remotemount import remotemount

pytestmark = pytest.mark.timeout(30)


def test_fuse_error_without_dev_fuse_names_sync_workspace() -> None:
    err = fuse_error("remote_mount", "/dev/fuse does not exist on this host")
    assert "remote_mount needs FUSE, but /dev/fuse does not exist" in str(err)
    assert "sync_workspace" in str(err)


def test_remotemount_unknown_keyword_is_refused(tmp_path) -> None:
    with pytest.raises(TypeError, match="unknown keywords \\['chunk'\\]"):
        remotemount(None, str(tmp_path), chunk=1)


def test_remotemount_missing_source_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="is not a directory"):
        remotemount(None, str(tmp_path / "nope"))
