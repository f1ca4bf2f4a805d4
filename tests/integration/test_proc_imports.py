"""Procs run the monarch the controller imported, whatever the working directory holds."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import monarch

pytestmark = pytest.mark.timeout(120)

_SCRIPT = textwrap.dedent(
    """
    import monarch
    from monarch.actor import Actor, endpoint, this_host

    class Where(Actor):
        @endpoint
        def where(self):
            import monarch
            return monarch.__file__

    procs = this_host().spawn_procs(per_host={"procs": 1})
    print("controller", monarch.__file__)
    print("proc", procs.spawn("where", Where).where.call_one().get())
    procs.stop().get()
    """
)


def test_a_monarch_package_in_the_working_directory_is_not_what_procs_import(
    tmp_path: Path,
) -> None:
    decoy = tmp_path / "monarch"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy monarch was imported')\n")
    script = tmp_path / "scripts" / "main.py"
    script.parent.mkdir()
    script.write_text(_SCRIPT)
    root = str(Path(monarch.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=root)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=100)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = str(Path(monarch.__file__).resolve())
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert Path(lines["controller"]).resolve() == Path(expected)
    assert Path(lines["proc"]).resolve() == Path(expected)
