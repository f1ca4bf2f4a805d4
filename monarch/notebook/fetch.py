"""`FetchView`: pick a point of a mesh and look at what an endpoint returns there.

One dropdown per mesh dimension chooses the coordinates; the view calls the endpoint on that
single actor (`call_one` on the slice) and shows the value: for arrays and tensors their shape,
dtype and statistics, with a heatmap (2-D) or histogram (1-D) when small; for anything else its
repr. It works with any picklable result; with the tensor engine it will show fetched shards.
"""

from __future__ import annotations

import html
import math
from typing import Any

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from monarch._src.lowlevel import target
from monarch._src.mesh.endpoint import Endpoint

__all__ = ["FetchView", "describe"]

_SMALL = 64 * 64  # up to this many elements, draw them


def _as_numbers(value: Any) -> tuple[list[int], str, list[float]] | None:
    """(shape, dtype, flat values as floats) of an ndarray or tensor, else None."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    try:
        flat = value.reshape(-1)
        if hasattr(flat, "detach"):  # torch
            flat = flat.detach().cpu().double()
        numbers = [float(x) for x in flat.tolist()]
    except Exception:  # e.g. strings in a numpy array: fall back to repr
        return None
    return [int(s) for s in shape], str(dtype), numbers


def _color(x: float, lo: float, hi: float) -> str:
    t = 0.5 if hi == lo or math.isnan(x) else (x - lo) / (hi - lo)
    return f"rgb({int(255 * t)},{int(80 + 100 * (1 - abs(2 * t - 1)))},{int(255 * (1 - t))})"


def describe(value: Any) -> str:
    """HTML describing `value`: statistics and a picture for arrays and tensors, else its repr."""
    numbers = _as_numbers(value)
    if numbers is None:
        text = repr(value)
        return f"<pre>{html.escape(text if len(text) < 4000 else text[:4000] + '...')}</pre>"
    shape, dtype, flat = numbers
    finite = [x for x in flat if math.isfinite(x)]
    if finite:
        lo, hi = min(finite), max(finite)
        mean = sum(finite) / len(finite)
        std = math.sqrt(sum((x - mean) ** 2 for x in finite) / len(finite))
        stats = f"min {lo:.4g} · max {hi:.4g} · mean {mean:.4g} · std {std:.4g}"
    else:
        lo = hi = 0.0
        stats = "no finite values"
    out = [f"<div><code>shape {tuple(shape)} · {html.escape(dtype)}</code><br>{stats}</div>"]
    if 0 < len(flat) <= _SMALL and len(shape) == 2:
        rows, cols = shape
        out.append("<table style='border-collapse:collapse'>")
        for r in range(rows):
            cells = "".join(
                f"<td title='{flat[r * cols + c]:.4g}' style='width:10px;height:10px;"
                f"background:{_color(flat[r * cols + c], lo, hi)}'></td>"
                for c in range(cols)
            )
            out.append(f"<tr>{cells}</tr>")
        out.append("</table>")
    elif finite and len(shape) == 1:
        bins = 20
        counts = [0] * bins
        for x in finite:
            counts[min(bins - 1, int((x - lo) / (hi - lo) * bins)) if hi > lo else 0] += 1
        top = max(counts)
        bars = "".join(
            f"<div title='{n}' style='display:inline-block;width:8px;margin-right:1px;"
            f"height:{int(60 * n / top)}px;background:#6a8fd0'></div>"
            for n in counts
        )
        out.append(f"<div style='height:62px;display:flex;align-items:flex-end'>{bars}</div>")
    return "".join(out)


class FetchView(ipywidgets.VBox):  # type: ignore[misc]  # VBox is untyped (Any)
    """Dropdowns for the coordinates of `endpoint`'s mesh, and the value it returns there."""

    def __init__(self, endpoint: Endpoint[..., Any], *args: Any, **kwargs: Any) -> None:
        if not isinstance(endpoint, Endpoint):
            raise TypeError(
                f"FetchView needs an endpoint of an actor mesh (mesh.method), not "
                f"{type(endpoint).__name__}."
            )
        self._endpoint = endpoint
        self._args = args
        self._kwargs = kwargs
        extent = target(endpoint).mesh.extent
        self.pickers = {
            label: ipywidgets.Dropdown(options=list(range(size)), value=0, description=label)
            for label, size in zip(extent.labels, extent.sizes)
        }
        self.output = ipywidgets.HTML()
        for picker in self.pickers.values():
            picker.observe(lambda _: self.fetch(), names="value")
        super().__init__([ipywidgets.HBox(list(self.pickers.values())), self.output])
        self.fetch()

    @property
    def point(self) -> dict[str, int]:
        """The coordinates chosen in the dropdowns, by dimension name."""
        return {label: picker.value for label, picker in self.pickers.items()}

    def fetch(self) -> Any:
        """Call the endpoint at the chosen point, show the value, and return it."""
        where = target(self._endpoint)
        one = getattr(where.mesh.slice(**self.point), where.method)
        try:
            value = one.call_one(*self._args, **self._kwargs).get(timeout=60)
        except Exception as exc:  # shown, not raised: the view stays usable
            self.output.value = (
                f"<pre style='color:#b00'>{html.escape(type(exc).__name__)}: "
                f"{html.escape(str(exc))}</pre>"
            )
            return exc
        self.output.value = describe(value)
        return value
