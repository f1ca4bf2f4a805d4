"""OwnershipTree.forget: a stopped mesh's record is dropped, and a late report about it is still
dropped (not delivered as if the mesh were unknown)."""

from __future__ import annotations

import pytest

from monarch._src.supervision import tree as tree_module
from monarch._src.supervision.tree import ROOT, OwnershipTree

pytestmark = pytest.mark.timeout(10)


def test_forget_drops_the_record_and_late_reports() -> None:
    tree = OwnershipTree()
    tree.add("m1", "workers", ROOT, 2, actors=True)
    tree.stopping("m1")
    tree.forget("m1")
    assert len(tree) == 0 and tree.status("m1") is None and tree.owner_failed(ROOT) == []
    assert tree.knows("m1")
    assert tree.rank_failed("m1", 0, "late") is None


def test_forget_remembers_only_the_last_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_module, "_FORGOTTEN_KEPT", 2)
    tree = OwnershipTree()
    for key in ("a", "b", "c"):
        tree.add(key, key, ROOT, 1, actors=False)
        tree.forget(key)
    assert [tree.knows(k) for k in ("a", "b", "c")] == [False, True, True]
