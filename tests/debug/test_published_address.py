"""The control server's address file, `.monarch/controller-<pid>.json` in the client's working
directory: written when the server starts, removed (with its folder, when that is left empty) at
exit, and a file left by a client that was killed is removed by the next client that publishes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.debug.test_control_auth import _finish, _serve

pytestmark = [pytest.mark.timeout(120)]


def test_a_killed_clients_file_is_swept_and_the_folder_goes_at_exit(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid names no process any more
    folder = tmp_path / ".monarch"
    folder.mkdir()
    stale = folder / f"controller-{dead.pid}.json"
    stale.write_text(json.dumps({"host": "localhost", "port": 1, "pid": dead.pid, "token": ""}))
    unrelated = folder / "notes.txt"
    unrelated.write_text("the user's")
    app, _ = _serve(tmp_path)
    try:
        assert not stale.exists()
        assert (folder / f"controller-{app.pid}.json").exists()
    finally:
        _finish(app)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]  # the user's file stays
    unrelated.unlink()
    app, _ = _serve(tmp_path)
    _finish(app)
    assert not folder.exists()  # the last file gone, its folder goes too
