"""No error is swallowed in silence: an `except` whose whole body is `pass` (or `...`) says why
in a comment on the `except` line or on that body line; anything else is handled or reported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

PACKAGE = Path(__file__).resolve().parents[2] / "monarch"


def silent_handlers(source: str) -> list[int]:
    """Line numbers of `except` clauses that only `pass` (or `...`) with no comment saying why."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ExceptHandler) or len(node.body) != 1:
            continue
        body = node.body[0]
        empty = isinstance(body, ast.Pass) or (
            isinstance(body, ast.Expr) and isinstance(body.value, ast.Constant)
            and body.value.value is Ellipsis)
        if empty and not any("#" in lines[n - 1] for n in (node.lineno, body.lineno)):
            found.append(node.lineno)
    return found


def test_the_check_finds_a_silent_handler_and_accepts_a_reason() -> None:
    silent = "try:\n    f()\nexcept OSError:\n    pass\n"
    reasoned = "try:\n    f()\nexcept OSError:\n    pass  # gone already\n"
    handled = "try:\n    f()\nexcept OSError as e:\n    log(e)\n"
    assert silent_handlers(silent) == [3]
    assert silent_handlers(reasoned) == [] and silent_handlers(handled) == []
    assert silent_handlers("try:\n    f()\nexcept Exception:\n    ...\n") == [3]


def test_no_error_is_swallowed_without_a_reason() -> None:
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for line in silent_handlers(path.read_text())]
    assert not offenders, (
        "except clauses that only pass, with no comment saying why the error may be dropped "
        "(handle it, report it, or say why):\n" + "\n".join(offenders))
