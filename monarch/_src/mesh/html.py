"""Rich HTML reprs for notebooks: meshes as grids of ranks, ValueMeshes as grids of values.

Jupyter calls `_repr_html_` when a mesh is the value of a cell. One- and two-dimensional meshes
render as a grid (rows along the first dimension); others as a list of points. Rank cells of
actor and proc meshes are coloured by state: running, failed (hover for the report) or stopped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from monarch._src.shape import Extent

if TYPE_CHECKING:
    from monarch._src.mesh.rank_state import RankState

__all__ = ["STATE_COLORS", "mesh_html", "value_mesh_html"]

# Background colour of a rank by state (`Health.value`; the live widgets use the same palette).
STATE_COLORS = {
    "starting": "#fff3c4",
    "running": "#cfe8cf",
    "failed": "#f4c7c3",
    "stopped": "#dddddd",
}
_MAX_CELLS = 1024
_STYLE = "border-collapse:collapse;font-family:monospace;font-size:12px"
_CELL = "border:1px solid #999;padding:2px 6px;text-align:center"


def _grid(extent: Extent, cell: Callable[[int], tuple[str, str, str]]) -> str:
    """`cell(rank) -> (text, background, title)` laid out over `extent`."""
    n = extent.nelements
    if n > _MAX_CELLS:
        return f"<i>{n} ranks (too many to draw)</i>"
    sizes = list(extent.sizes)
    if len(sizes) == 0:
        rows, cols = 1, 1
    elif len(sizes) == 1:
        rows, cols = 1, sizes[0]
    elif len(sizes) == 2:
        rows, cols = sizes
    else:
        rows, cols = n, 1
    out = [f"<table style='{_STYLE}'>"]
    for r in range(rows):
        out.append("<tr>")
        for c in range(cols):
            text, color, title = cell(r * cols + c)
            out.append(
                f"<td style='{_CELL};background:{color}' title='{html.escape(title, quote=True)}'>"
                f"{html.escape(text)}</td>"
            )
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def mesh_html(kind: str, name: str, extent: Extent, states: Sequence[RankState]) -> str:
    """A mesh header and its ranks, coloured by `states[rank]`."""
    counts: dict[str, int] = {}
    for rank_state in states:
        counts[rank_state.state.value] = counts.get(rank_state.state.value, 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))

    def cell(rank: int) -> tuple[str, str, str]:
        state, detail, pid = states[rank].state.value, states[rank].detail, states[rank].pid
        where = f" (pid {pid})" if pid is not None else ""
        title = f"rank {rank}{where}: {state} {detail}".strip()
        return str(rank), STATE_COLORS.get(state, "#ffffff"), title

    return (
        f"<div><b>{html.escape(kind)}</b> {html.escape(name)} "
        f"<code>{html.escape(repr(extent))}</code> ({html.escape(summary)})"
        f"{_grid(extent, cell)}</div>"
    )


def value_mesh_html(extent: Extent, values: Sequence[Any]) -> str:
    def cell(rank: int) -> tuple[str, str, str]:
        text = repr(values[rank])
        return (text if len(text) <= 40 else text[:37] + "..."), "#ffffff", text[:500]

    extent_text = html.escape(repr(extent))
    return f"<div><b>ValueMesh</b> <code>{extent_text}</code>{_grid(extent, cell)}</div>"
