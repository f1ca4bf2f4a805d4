"""docs/examples.md lists every tutorial and cookbook recipe, and nothing that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_examples_index_is_complete() -> None:
    index = (ROOT / "docs" / "examples.md").read_text()
    listed = set(re.findall(r"`((?:tutorials|cookbook)/[\w./-]+\.(?:ipynb|py))`", index))
    present = {
        str(p.relative_to(ROOT))
        for p in [*ROOT.glob("tutorials/*.ipynb"), *ROOT.glob("cookbook/*.py")]
    }
    assert sorted(present - listed) == [], "examples missing from docs/examples.md"
    assert sorted(listed - present) == [], "docs/examples.md lists examples that do not exist"
