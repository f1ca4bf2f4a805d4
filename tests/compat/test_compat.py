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


@pytest.mark.timeout(10)
def test_count_passed_ours_only_lines_on_torchmonarch_count_as_not_run() -> None:
    golden = ["check a: 1", "check slice call: ours only (torchmonarch hangs)",
              "check b: differs (torchmonarch wraps the stride)"]
    on_peer = run.Result("p", list(golden), golden, 0, "\n".join(
        [golden[0], run.NOT_RUN_PREFIX + "slice call", *golden[1:]]), 1.0)
    on_ours = run.Result("p", list(golden), golden, 0, "\n".join(golden), 1.0)
    assert run.count_passed(on_peer) == (2, 0, 1)
    assert run.count_passed(on_ours) == (3, 0, 0)
    wrong = run.Result("p", [golden[0], "check slice call: MISMATCH", golden[2]], golden, 0,
                       "", 1.0)
    assert run.count_passed(wrong) == (2, 1, 0)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", program_names())
def test_program_matches_torchmonarch(name: str) -> None:
    result = run_program(name, sys.executable, timeout=150)
    assert result.ok, f"{name}:\n" + "\n".join(result.failures) + "\n--- output tail ---\n" + \
        result.output[-3000:]
