"""Every compatibility program, run on this implementation against torchmonarch's golden output.

The programs (``programs/``) use only the public API; their golden files (``expected/``) were
recorded by running them on torchmonarch 0.7.0, and ``make compat-reference`` checks they still
pass there. A failure prints the differing checks as a diff (golden first).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.compat import run
from tests.compat.run import program_names, run_program


def test_program_names_helper_modules_are_not_programs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("b_prog.py", "a_prog.py", "compat.py", "_shared.py", "_x_prog.py", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    monkeypatch.setattr(run, "PROGRAMS", tmp_path)
    assert program_names() == ["a_prog", "b_prog"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", program_names())
def test_program_matches_torchmonarch(name: str) -> None:
    result = run_program(name, sys.executable, timeout=150)
    assert result.ok, f"{name}:\n" + "\n".join(result.failures) + "\n--- output tail ---\n" + \
        result.output[-3000:]
