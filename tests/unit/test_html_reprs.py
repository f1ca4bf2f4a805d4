"""Notebook reprs of extents and ValueMeshes (no processes)."""

from __future__ import annotations

from monarch._src.mesh.html import mesh_html
from monarch._src.mesh.rank_state import Health, RankState
from monarch._src.mesh.value_mesh import ValueMesh
from monarch._src.shape import Extent, Shape, Slice


def test_extent_repr_html_lists_every_dimension() -> None:
    html = Extent(["hosts", "gpus"], [2, 4])._repr_html_()
    assert "hosts: 2" in html and "gpus: 4" in html


def test_value_mesh_repr_html_is_a_grid_of_escaped_values() -> None:
    vm = ValueMesh(Shape(["x", "y"], Slice.new_row_major([2, 2])), ["<a>", 1, 2, 3])
    html = vm._repr_html_()
    assert html.count("<tr>") == 2 and html.count("<td") == 4
    assert "&lt;a&gt;" in html and "<a>" not in html.replace("<a>'", "")


def test_mesh_html_colours_ranks_by_state_and_counts_them() -> None:
    html = mesh_html(
        "ActorMesh", "workers", Extent(["gpus"], [3]),
        [RankState(Health.RUNNING, "", 11, 0), RankState(Health.FAILED, "Killed(sig=9)", 12, 1),
         RankState(Health.RUNNING, "", None, 2)],
    )
    assert "(1 failed, 2 running)" in html
    assert "#f4c7c3" in html and "Killed(sig=9)" in html
    assert "rank 1 (pid 12): failed" in html


def test_mesh_html_too_many_ranks_is_summarised() -> None:
    html = mesh_html(
        "ProcMesh", "big", Extent(["r"], [5000]), [RankState(Health.RUNNING, "", None, 0)] * 5000
    )
    assert "5000 ranks (too many to draw)" in html
