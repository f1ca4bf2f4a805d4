"""Monarch's shapes: `monarch.Shape` and `monarch.NDSlice`, the strided rank sets under meshes.

Follows the mesh pages' worked facts on slicing by named dimensions (a 4x3 mesh sliced to
``hosts=slice(0, 3, 2)``/``gpus=slice(1, 3)`` covers global ranks 1, 2, 7, 8 through the slice
``offset 1, sizes [2, 2], strides [6, 1]``): constructing slices and shapes, ``at``/``select``/
``index``, ranks and coordinates, ``from_list``/``new_row_major``, reprs and strs, errors.
"""

import pickle

from compat import check, differs, outcome, raises

from monarch import NDSlice, Shape

s = NDSlice(offset=1, sizes=[2, 3], strides=[6, 1])
check("slice repr", s)
check("slice str", str(s))
check("slice fields", (s.offset, s.sizes, s.strides, s.ndim))
check("slice ranks", list(s))
check("slice len", len(s))
check("slice getitem", s[2])
check("slice getitem range", s[1:3])
check("slice get", s.get(4))
check("slice index of rank", s.index(7))
check("slice coordinates", s.coordinates(8))
check("slice nditem", s.nditem([1, 2]))
check("slice contains", (7 in s, 4 in s))
check("slice equality", s == NDSlice(offset=1, sizes=[2, 3], strides=[6, 1]))
check("slice pickles", pickle.loads(pickle.dumps(s)))
check("slice new_row_major", NDSlice.new_row_major([2, 3]))
check("slice from_list one run", NDSlice.from_list([1, 3, 5]))
check("slice from_list two runs", NDSlice.from_list([0, 1, 2, 5, 6, 7]))
check("slice from_list unsorted", NDSlice.from_list([5, 3, 1]))
check("slice from_list mixed strides", NDSlice.from_list([0, 2, 4, 5, 6]))
check("slice from_list repeats", NDSlice.from_list([4, 4]))
check("slice from_list empty", NDSlice.from_list([]))
check("slice of size zero", NDSlice(offset=0, sizes=[0], strides=[1]))
raises("slice position past the end", lambda: s[9])
raises("slice index of absent rank", s.index, 4)
raises("slice coordinates of absent rank", s.coordinates, 5)
raises("slice nditem with too few coordinates", s.nditem, [1])
raises("slice sizes and strides differ", NDSlice, offset=0, sizes=[2], strides=[1, 1])
raises("slice negative offset", NDSlice, offset=-1, sizes=[1], strides=[1])

sh = Shape(["hosts", "gpus"], NDSlice.new_row_major([4, 3]))
check("shape repr", sh)
check("shape str", str(sh))
check("shape labels", sh.labels)
check("shape ndslice", sh.ndslice)
check("shape extent", sh.extent)
check("shape region labels", sh.region.labels)
check("shape ranks", sh.ranks())
check("shape len", len(sh))
check("shape coordinates", sh.coordinates(7))
check("shape at", sh.at("gpus", 1))
check("shape at ranks", sh.at("gpus", 1).ranks())
check("shape select with step", sh.select("hosts", slice(0, 3, 2)))
check("shape select negative start", sh.select("gpus", slice(-2, None)))
check("shape select clamps the stop", sh.select("gpus", slice(1, 10)).ranks())
check("shape index", sh.index(hosts=2))
worked = sh.select("hosts", slice(0, 3, 2)).select("gpus", slice(1, 3))
check("worked fact slice", worked.ndslice)
check("worked fact ranks", worked.ranks())
check("worked fact str", str(worked))
check("shape equality", sh == Shape(["hosts", "gpus"], NDSlice.new_row_major([4, 3])))
check("shape pickles", pickle.loads(pickle.dumps(sh)))
check("shape unity", Shape.unity())
check("shape unity str", str(Shape.unity()))
check("shape quotes labels in repr", Shape(['a"b', "c d"], NDSlice.new_row_major([1, 2])))
check("shape raw labels in str", str(Shape(['a"b', "c d"], NDSlice.new_row_major([1, 2]))))
raises("shape at unknown label", sh.at, "x", 0)
raises("shape at past the end", sh.at, "gpus", 3)
raises("shape at negative", sh.at, "gpus", -1)
raises("shape at a float", sh.at, "gpus", 1.0)
raises("shape select an int", sh.select, "gpus", 1)
raises("shape select zero step", sh.select, "gpus", slice(0, 3, 0))
differs(
    "shape select backwards", lambda: outcome(sh.select, "gpus", slice(None, None, -1)),
    "ValueError: nonrectangular shape",
    'returned Shape { labels: ["hosts", "gpus"], slice: Slice { offset: 2, sizes: [4, 1], '
    'strides: [3, 18446744073709551615] } }',
    "torchmonarch returns a shape whose stride wrapped around to 2**64 - 1",
)
raises("shape select empty", sh.select, "gpus", slice(2, 1))
raises("shape labels and slice differ", Shape, ["a"], NDSlice.new_row_major([2, 2]))
raises("shape coordinates of absent rank", worked.coordinates, 5)
