"""How Monarch prints its meshes: the reprs and strs users see in a REPL, a log or an error.

Follows the meshes and actors pages' objects as a user holds them: ``this_host()``, the proc mesh
from ``spawn_procs``, ``this_proc()``, actor meshes (whole, sliced, flattened, zero-dimensional),
endpoints and non-endpoint attributes, the ValueMesh of a ``call``, the same objects seen from
inside an actor, the mesh named in a ``size()`` error, and the private import paths code written
for Monarch uses (``monarch._src.actor.actor_mesh.ActorMesh`` and friends).
"""

from compat import check, raises

from monarch._src.actor.actor_mesh import ActorMesh, Point, ValueMesh
from monarch._src.actor.host_mesh import HostMesh
from monarch._src.actor.proc_mesh import ProcMesh
from monarch.actor import Actor, context, current_rank, endpoint, this_host, this_proc


class Shown(Actor):
    limit = 3

    @endpoint
    def rank(self) -> int:
        return current_rank().rank

    @endpoint
    def seen_inside(self, other) -> list:
        here = context().actor_instance
        return [repr(other), str(other), repr(other.rank), repr(here.proc_mesh), repr(this_proc()),
                repr(this_host())]


host = this_host()
check("host repr", repr(host))
check("host str", str(host))
check("host is a HostMesh", isinstance(host, HostMesh))

procs = host.spawn_procs(per_host={"hosts": 2, "gpus": 2})
check("procs repr", repr(procs))
check("procs str", str(procs))
check("procs slice repr", repr(procs.slice(gpus=0)))
check("procs is a ProcMesh", isinstance(procs, ProcMesh))
check("procs type name", type(procs).__name__)
check("this_proc repr", repr(this_proc()))

shown = procs.spawn("shown", Shown)
check("actor mesh repr", repr(shown))
check("actor mesh str", str(shown))
check("actor mesh slice repr", repr(shown.slice(gpus=1)))
check("actor mesh range slice repr", repr(shown.slice(gpus=slice(0, 1))))
check("actor mesh flatten repr", repr(shown.flatten("rank")))
check("actor mesh rename repr", repr(shown.rename(hosts="nodes")))
check("zero-dimensional actor mesh repr", repr(shown.slice(hosts=0, gpus=0)))
check("actor mesh is an ActorMesh", isinstance(shown, ActorMesh))
check("actor mesh type name", type(shown).__name__)
check("endpoint repr", repr(shown.rank))
check("endpoint str", str(shown.rank))
check("endpoint on a slice repr", repr(shown.slice(gpus=0).rank))
check("non-endpoint attribute repr", repr(shown.limit))
check("endpoint on the class repr", repr(Shown.rank))

values = shown.rank.call().get()
check("value mesh repr", repr(values))
check("value mesh str", str(values))
check("value mesh is a ValueMesh", isinstance(values, ValueMesh))
check("value mesh slice repr", repr(values.slice(hosts=1)))
check("point repr", repr(next(iter(values.items()))[0]))
check("value mesh points are Points", all(isinstance(point, Point) for point, _ in values.items()))

inside = shown.slice(hosts=0, gpus=0).seen_inside.call_one(shown.slice(hosts=1)).get()
check("actor mesh seen inside", inside[0])
check("actor mesh str seen inside", inside[1])
check("endpoint seen inside", inside[2])
check("own proc mesh seen inside", inside[3])
check("this_proc seen inside", inside[4])
check("this_host seen inside", inside[5])

raises("procs size of unknown dim", procs.size, "nodes")
raises("actor mesh size of unknown dim", shown.size, "nodes")
raises("host size of unknown dim", host.size, "hosts")
procs.stop().get()
check("stopped", "yes")
