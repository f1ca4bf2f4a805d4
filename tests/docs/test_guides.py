"""Every code block of the guides in `docs/` (and of the README) runs, so the docs cannot rot.

A guide's ```` ```python ```` blocks are joined, in order, into one script that runs in a fresh
Python process from the repository root (one process per guide, as a reader would paste them
into one session). A block fenced ```` ```python no-run ```` is shown but not run: multi-host or
GPU-only snippets. Blocks in other languages (```` ```sh ````, ```` ```text ````) are not run.

A failing block is reported with the guide's name and the line of the block in the Markdown
file: each block is compiled under the guide's file name with its own line numbers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GUIDE_TIMEOUT = 150.0

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)$")


def code_blocks(text: str) -> list[tuple[int, str, str]]:
    """`(line, info, code)` for every fenced block of a Markdown text; `line` is 1-based."""
    blocks: list[tuple[int, str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i].strip())
        if opened is None or not opened.group("info").strip():
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"code block opened at line {i + 1} is never closed")
        blocks.append((start, opened.group("info").strip(), "\n".join(lines[start:j])))
        i = j + 1
    return blocks


def runnable_blocks(path: Path) -> list[tuple[int, str]]:
    """`(first line, code)` of the guide's runnable blocks, in order."""
    return [
        (line + 1, code)
        for line, info, code in code_blocks(path.read_text())
        if info.split()[0] == "python" and "no-run" not in info.split()[1:]
    ]


def runner_script(path: Path) -> str:
    """A script that runs the blocks in `__main__`, compiled under the guide's own name and line
    numbers, so a traceback points into the Markdown file."""
    blocks = [(str(path.relative_to(ROOT)), line, code) for line, code in runnable_blocks(path)]
    # The loop runs in a function so its variables never shadow names the guide defines.
    return (
        "import sys\n"
        "def _run_blocks(blocks):\n"
        "    for name, line, code in blocks:\n"
        "        compiled = compile('\\n' * (line - 1) + code, name, 'exec')\n"
        "        exec(compiled, sys.modules['__main__'].__dict__)\n"
        f"_run_blocks({blocks!r})\n"
    )


def guides() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_code_blocks_parser() -> None:
    text = "intro\n```python\nx = 1\n```\n\n```python no-run\ny = 2\n```\n```sh\nls\n```\n"
    assert code_blocks(text) == [(2, "python", "x = 1"), (6, "python no-run", "y = 2"),
                                 (9, "sh", "ls")]
    with pytest.raises(ValueError, match="line 1 is never closed"):
        code_blocks("```python\nx = 1\n")


def test_every_guide_is_listed_in_the_index() -> None:
    index = (DOCS / "index.md").read_text()
    missing = [p.name for p in guides() if p.name != "index.md" and f"({p.name})" not in index]
    assert not missing, f"docs/index.md does not link these guides: {missing}"


@pytest.mark.timeout(GUIDE_TIMEOUT + 30)
@pytest.mark.parametrize(
    "guide", [g for g in [*guides(), ROOT / "README.md"] if runnable_blocks(g)],
    ids=lambda p: p.name,
)
def test_guide_runs(guide: Path, tmp_path: Path) -> None:
    path = tmp_path / f"run_{guide.stem}.py"
    path.write_text(runner_script(guide))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        # In the test's folder: what a guide writes to its working directory (a trace, the
        # controller's `.monarch/` files) stays out of the checkout.
        [sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=GUIDE_TIMEOUT,
    )
    assert proc.returncode == 0, (
        f"a code block of {guide.relative_to(ROOT)} failed (exit {proc.returncode})\n"
        f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )
