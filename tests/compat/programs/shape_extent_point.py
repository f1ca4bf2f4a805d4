"""Monarch's mesh pages on extents and points: `Extent`, `Point` and the region of an extent.

Follows the "Meshes" material on shapes (``monarch.actor.Extent``: labels, sizes, ``nelements``,
its repr ``{hosts: 2, gpus: 4}``; ``Point``: a rank read as coordinates, ``**point`` into
``mesh.slice``, ``rank``/``extent``/``size``, repr ``{'hosts': 0/2, 'gpus': 1/4}``) and the
errors those types raise for bad input, plus pickling (both travel in messages).
"""

import pickle

from compat import check, raises

from monarch.actor import Extent, Point


def value_error(fn, *args):
    """Monarch raises ValueError for an unknown label; ours a subclass of it (and of KeyError)."""
    try:
        fn(*args)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return "no error"


e = Extent(["hosts", "gpus"], [2, 4])
check("extent repr", e)
check("extent str", str(e))
check("extent labels", e.labels)
check("extent sizes", e.sizes)
check("extent nelements", e.nelements)
check("extent iterates labels", list(e))
check("extent keys", list(e.keys()))
check("extent as dict", dict(e))
check("extent getitem", e["gpus"])
check("extent len", len(e))
check("extent contains label", "gpus" in e)
check("extent equality", e == Extent(["hosts", "gpus"], [2, 4]))
check("extent inequality", e != Extent(["hosts"], [2]))
check("extent from tuples", Extent(("a",), (2,)))
check("extent quotes odd labels", Extent(["a b", "x1", "a-b"], [2, 1, 3]))
check("extent empty", Extent([], []))
check("extent empty nelements", Extent([], []).nelements)
check("extent empty is falsy", bool(Extent([], [])))
check("extent zero size", Extent(["a"], [0]))
check("extent pickles", pickle.loads(pickle.dumps(e)))
check("extent region repr", e.region)
check("extent region labels", e.region.labels)
check("extent region slice", e.region.slice())
check("extent region as_shape", e.region.as_shape())
check("extent region point_of_base_rank", e.region.point_of_base_rank(6))
raises("extent region point outside", e.region.point_of_base_rank, 9)
check("extent region equality", e.region == Extent(["hosts", "gpus"], [2, 4]).region)
check("extent region pickles", pickle.loads(pickle.dumps(e.region)) == e.region)
check("extent unknown label", value_error(lambda: e["x"]))
raises("extent labels and sizes differ", Extent, ["a"], [1, 2])
raises("extent negative size", Extent, ["a"], [-1])
raises("extent labels as a string", Extent, "ab", [1, 2])

p = Point(5, e)
check("point repr", p)
check("point str", str(p))
check("point rank", p.rank)
check("point extent", p.extent)
check("point coordinate", p["gpus"])
check("point size", p.size("gpus"))
check("point as dict", dict(p))
check("point len", len(p))
check("point iterates labels", list(p))
check("point keys", list(p.keys()))
check("point items", list(p.items()))
check("point values", list(p.values()))
check("point get", p.get("hosts"))
check("point contains label", "gpus" in p)
check("point equality", p == Point(5, e))
check("point differs by extent", Point(0, Extent(["a"], [2])) == Point(0, Extent(["b"], [2])))
check("point is not a dict", Point(0, Extent(["a"], [2])) == {"a": 0})
check("point as keyword arguments", (lambda **kw: kw)(**p))
check("point pickles", pickle.loads(pickle.dumps(p)))
check("point of empty extent", Point(0, Extent([], [])))
check("point quotes labels", Point(1, Extent(["a-b"], [2])))
check("point last rank", Point(7, e))
check("point unknown label", value_error(lambda: p["x"]))
check("point size of unknown label", value_error(p.size, "x"))
# Monarch builds the point and fails when it is read; ours fails at once, with the same error.
raises("point rank past the end", lambda: repr(Point(8, e)))
raises("point negative rank", Point, -1, e)
raises("point over a dict", Point, 1, {"a": 2})
raises("point rank not an int", Point, "1", e)
