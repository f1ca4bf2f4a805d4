"""`mypy --strict` over the whole of `monarch/` (the settings are pyproject.toml's [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_mypy_strict_is_clean():
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=590,
    )
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert run.returncode == 0, (
        f"mypy --strict: {len(errors)} errors\n" + run.stdout[-20000:] + run.stderr
    )
