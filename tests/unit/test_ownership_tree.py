"""The ownership tree's rules, with no processes: who is told about a failure, and when not."""

from __future__ import annotations

import threading

import pytest

from monarch._src.supervision.tree import ROOT, Delivery, Health, OwnershipTree


def _tree() -> OwnershipTree:
    tree = OwnershipTree()
    tree.add("workers-1", "workers", ROOT, 4, actors=True)
    tree.add("procs-1", "procs", ROOT, 4, actors=False)
    return tree


def test_tree_rank_failed_first_report_is_delivered_to_owner() -> None:
    tree = _tree()
    delivery = tree.rank_failed("workers-1", 2, "boom")
    assert delivery == Delivery(ROOT, "workers", 2, "boom")
    assert tree.health("workers-1", 2) is Health.FAILED
    assert tree.health("workers-1", 1) is Health.RUNNING


def test_tree_rank_failed_twice_is_delivered_once() -> None:
    tree = _tree()
    assert tree.rank_failed("workers-1", 0, "first") is not None
    assert tree.rank_failed("workers-1", 0, "again") is None
    assert tree.status("workers-1") == (False, {0: "first"})


def test_tree_every_rank_of_a_mesh_is_delivered_once_each() -> None:
    tree = _tree()
    deliveries = [tree.rank_failed("workers-1", r, f"r{r}") for r in range(4)]
    assert [d.rank for d in deliveries if d is not None] == [0, 1, 2, 3]


def test_tree_stopped_mesh_failures_are_not_delivered() -> None:
    tree = _tree()
    assert tree.stopping("procs-1") is True
    assert tree.rank_failed("procs-1", 1, "exited after stop") is None
    assert tree.health("procs-1", 1) is Health.STOPPED


def test_tree_stopping_twice_reports_false() -> None:
    tree = _tree()
    assert tree.stopping("workers-1") is True
    assert tree.stopping("workers-1") is False
    assert tree.stopping("unknown") is False


def test_tree_unknown_mesh_is_not_delivered_and_not_known() -> None:
    tree = _tree()
    assert tree.rank_failed("elsewhere", 0, "x") is None
    assert not tree.knows("elsewhere")
    assert tree.status("elsewhere") is None


def test_tree_rank_out_of_range_is_an_error() -> None:
    tree = _tree()
    with pytest.raises(ValueError, match="has no rank 9"):
        tree.rank_failed("workers-1", 9, "x")


def test_tree_duplicate_mesh_key_is_an_error() -> None:
    tree = _tree()
    with pytest.raises(ValueError, match="already in the ownership tree"):
        tree.add("workers-1", "again", ROOT, 1, actors=True)


def test_tree_owner_failed_returns_running_owned_meshes_newest_first() -> None:
    tree = OwnershipTree()
    tree.add("a", "a", "actor-x", 1, actors=False)
    tree.add("b", "b", "actor-x", 2, actors=True)
    tree.add("c", "c", "actor-x", 1, actors=True)
    tree.add("d", "d", "actor-y", 1, actors=True)
    tree.stopping("b")
    assert tree.owner_failed("actor-x") == ["c", "a"]
    assert tree.owner_failed("actor-y") == ["d"]
    assert tree.owner_failed("nobody") == []


def test_tree_delivery_names_the_owning_actor() -> None:
    tree = OwnershipTree()
    tree.add("child-1", "child", "parent-7", 2, actors=True)
    delivery = tree.rank_failed("child-1", 1, "died")
    assert delivery is not None and delivery.owner == "parent-7"
    assert tree.owner_of("child-1") == "parent-7"


def test_tree_concurrent_reports_of_one_rank_deliver_exactly_once() -> None:
    tree = _tree()
    results: list[Delivery | None] = []
    start = threading.Barrier(8)

    def report() -> None:
        start.wait()
        results.append(tree.rank_failed("workers-1", 3, "race"))

    threads = [threading.Thread(target=report) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is not None for r in results) == 1


def test_tree_clean_only_while_known_running_and_unfailed() -> None:
    # `clean` is the call path's shortcut past `status`: anything but a known mesh that is
    # neither stopped nor failed must take the closer look.
    tree = _tree()
    assert tree.clean("workers-1") and tree.clean("procs-1")
    assert not tree.clean("elsewhere-1")
    tree.rank_failed("workers-1", 3, "boom")
    assert not tree.clean("workers-1")
    assert tree.stopping("procs-1")
    assert not tree.clean("procs-1")
    tree.add("later-1", "later", ROOT, 1, actors=True)
    tree.forget("later-1")
    assert not tree.clean("later-1")
