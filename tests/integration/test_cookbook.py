"""The cookbook recipes run as scripts, as a user would run them, and do what they say."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"

pytestmark = pytest.mark.timeout(120)


def _run(name: str) -> str:
    result = subprocess.run(
        [sys.executable, str(COOKBOOK / name)], capture_output=True, text=True, timeout=100
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_demo_runs_every_adverb_and_stops() -> None:
    out = _run("demo.py")
    assert "Accumulator sum: 24" in out
    assert "send to a ranked port: [(0, 11), (1, 11), (2, 1), (3, 1)]" in out
    assert "stopped; every proc exited" in out


def test_fault_tolerant_workers_replace_a_killed_worker() -> None:
    out = _run("fault_tolerant_workers.py")
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert lines["squares"] == lines["after the kill, squares"] == "[0, 1, 4, 9, 16, 25]"
    before = ast.literal_eval(lines["worker pids"])
    after = ast.literal_eval(lines["worker pids now"])
    assert before[0] == after[0] and before[2] == after[2]
    assert before[1] != after[1]
