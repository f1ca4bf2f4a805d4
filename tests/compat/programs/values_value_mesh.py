"""Monarch's ValueMesh: the result of `endpoint.call()`, and a value users may build themselves.

Follows the ValueMesh documentation (``ValueMesh(shape, values)``, ``items()``/``values()``/
iteration, ``item(**coords)``, ``get(rank)``, the mesh protocol ``slice``/``flatten``/``rename``/
``split``/``size``/``sizes``/``extent``, the idiom ``vm.flatten("r").slice(r=0).item()``, its repr)
and the same operations on a ValueMesh returned by ``call`` on an actor mesh and on a slice of it.
"""

import pickle

from compat import check, raises

from monarch import NDSlice, Shape
from monarch.actor import Actor, ValueMesh, current_rank, endpoint, this_host


def grid(**sizes):
    return Shape(list(sizes), NDSlice.new_row_major(list(sizes.values())))


vm = ValueMesh(grid(x=2, y=2), ["a", "b", "c", "d"])
check("repr", vm)
check("str", str(vm))
check("items", list(vm.items()))
check("values", list(vm.values()))
check("iteration", list(vm))
check("points carry local ranks", [point.rank for point, _ in vm])
check("len", len(vm))
check("item", vm.item(x=1, y=0))
check("get", vm.get(2))
check("extent", vm.extent)
check("sizes", vm.sizes)
check("size", vm.size())
check("size of a dim", vm.size("x"))
check("size of dims", vm.size(["x", "y"]))
check("slice drops a dim", vm.slice(x=1))
check("slice keeps a dim", vm.slice(y=slice(1, 2)))
check("slice with a step", vm.slice(y=slice(None, None, 2)))
check("slice then item", vm.slice(x=1).slice(y=1).item())
check("flatten", vm.flatten("r"))
check("rank zero idiom", vm.flatten("r").slice(r=0).item())
check("rename", vm.rename(x="h"))
check("split", vm.flatten("r").split(r=("p", "q"), q=2))
check("split inferring a size", vm.flatten("r").split(r=("p", "q"), p=2).sizes)
check("pickles", pickle.loads(pickle.dumps(vm)))
check("no value equality", vm == ValueMesh(grid(x=2, y=2), ["a", "b", "c", "d"]))
check("long values wrap", ValueMesh(grid(x=3), [{"k": i, "text": "x" * 30} for i in range(3)]))
zero = ValueMesh(Shape.unity(), [5])
check("zero-dimensional repr", zero)
check("zero-dimensional item", zero.item())
check("zero-dimensional items", list(zero.items()))
check("slice to one point", vm.slice(x=0, y=1))
raises("item missing a dim", vm.item, x=1)
raises("item extra dim", vm.item, x=1, y=0, z=0)
raises("item past the end", vm.item, x=2, y=0)
raises("item with no coordinates", vm.item)
raises("get past the end", vm.get, 9)
raises("get negative", vm.get, -1)
raises("wrong number of values", ValueMesh, grid(x=2), [1])
raises("slice unknown dim", vm.slice, z=0)
raises("slice past the end", vm.slice, x=5)
raises("slice negative", vm.slice, x=-1)
raises("slice with a string index", vm.slice, x="0")
raises("slice with a float index", vm.slice, x=1.0)
raises("flatten a sparse mesh", lambda: vm.slice(y=1).flatten("r"))
raises("flatten a strided mesh", lambda: vm.slice(y=slice(0, 2, 2)).flatten("r"))
raises("split with a string", vm.split, x="h")
raises("split uneven", vm.split, x=("h", "i"), h=3)
raises("split sizes that do not multiply", vm.split, x=("h", "i"), h=1, i=1)
raises("split unused size", vm.split, q=2)
raises("split two unknown sizes", vm.split, x=("h", "i"))
raises("split onto an existing name", vm.split, x=("y",))
raises("split size not an int", vm.split, x=("h", "i"), h="2")
raises("rename unknown dim", vm.rename, z="q")
raises("rename onto an existing name", vm.rename, x="y")
raises("size of unknown dim", vm.size, "z")
raises("indexing", lambda: vm[0])


class Ranked(Actor):
    @endpoint
    def value(self) -> int:
        return current_rank().rank * 10

    @endpoint
    def read_mesh(self, mesh) -> list:
        # A ValueMesh passed as an argument arrives whole, with its shape.
        return [repr(mesh.extent), mesh.item(hosts=1, gpus=2), list(mesh.slice(hosts=0).values())]

    @endpoint
    def make_mesh(self) -> ValueMesh:
        return ValueMesh(Shape(["k"], NDSlice.new_row_major([2])), ["left", "right"])


procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 3})
ranked = procs.spawn("ranked", Ranked)
result = ranked.value.call().get()
check("call result repr", result)
check("call result values", list(result.values()))
check("call result item", result.item(hosts=1, gpus=2))
check("call result slice", result.slice(gpus=1))
check("call result flatten", list(result.flatten("rank").values()))
check("call result rank zero", result.flatten("rank").slice(rank=0).item())
on_slice = ranked.slice(hosts=1, gpus=slice(1, 3)).value.call().get()
check("call on a slice repr", on_slice)
check("call on a slice points", [dict(point) for point, _ in on_slice.items()])
check("call on a one-point slice", ranked.slice(hosts=0, gpus=0).value.call().get())
check("call result pickles", pickle.loads(pickle.dumps(result)).item(hosts=0, gpus=1))
one = ranked.slice(hosts=0, gpus=0)
check("value mesh as an endpoint argument", one.read_mesh.call_one(result).get())
check("value mesh returned by an endpoint", one.make_mesh.call_one().get())
check("value meshes of value meshes", ranked.slice(hosts=1).make_mesh.call().get().item(gpus=1))
procs.stop().get()
