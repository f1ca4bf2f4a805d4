"""Monarch's meshes page: proc and actor meshes, their shapes, and slicing by named dimensions.

Follows "Meshes" and the getting-started slicing section: ``spawn_procs(per_host=...)`` shapes
(host dims + per-host dims), ``extent``/``sizes``/``size``/``len``, ``slice`` with an int (drops
the dim) or a ``slice`` (keeps it, steps allowed), spawning on a sliced proc mesh, messages to a
slice reaching only its actors with ``current_rank()`` relative to the slice while
``actor_instance.rank`` keeps the spawn coordinates, ``flatten``/``rename``/``split`` on actor
meshes, the rank-zero idiom ``flatten("rank").slice(rank=0)``, pairing meshes with
``other.slice(**context().actor_instance.rank)``, and the errors of the mesh protocol.
"""

import os

from compat import check, raises

from monarch.actor import Actor, context, current_rank, current_size, endpoint, this_host, this_proc


class Where(Actor):
    @endpoint
    def rank(self) -> dict:
        return dict(current_rank())

    @endpoint
    def extent_seen(self) -> dict:
        return dict(current_size())

    @endpoint
    def spawn_rank(self) -> dict:
        return dict(context().actor_instance.rank)

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def partner(self, others) -> dict:
        # Pairing: the actor of `others` at my own spawn coordinates.
        mine = context().actor_instance.rank
        return others.slice(**mine).rank.call_one().get()


def ranks(mesh):
    return [r for _, r in sorted(mesh.rank.call().get().items(), key=lambda pv: pv[0].rank)]


host = this_host()
check("host extent", host.extent)
check("host sizes", host.sizes)
check("host len", len(host))

procs = host.spawn_procs(per_host={"hosts": 2, "gpus": 3})
check("procs extent", procs.extent)
check("procs sizes", procs.sizes)
check("procs size", procs.size())
check("procs size of a dim", procs.size("gpus"))
check("procs size of dims", procs.size(("hosts", "gpus")))
check("procs len", len(procs))
check("procs slice int extent", procs.slice(gpus=0).extent)
check("procs slice range extent", procs.slice(gpus=slice(1, 3)).extent)
check("procs slice step extent", procs.slice(hosts=slice(0, 2, 2)).extent)
raises("procs slice step that does not nest", procs.slice, gpus=slice(0, 3, 2))
check("procs flatten extent", procs.flatten("rank").extent)
check("procs rename extent", procs.rename(gpus="local").extent)
check("procs split extent", procs.split(gpus=("a", "b"), b=1).extent)
check("one proc per host", host.spawn_procs().extent)
check("named procs", host.spawn_procs(per_host={"gpus": 1}, name="trainers").extent)

where = procs.spawn("where", Where)
check("actor mesh extent", where.extent)
check("actor mesh len", len(where))
check("actor mesh sizes", where.sizes)
check("all ranks", ranks(where))
check("distinct processes", len(set(where.pid.call().get().values())))
check("slice int drops the dim", where.slice(gpus=1).extent)
check("slice int ranks", ranks(where.slice(gpus=1)))
check("slice int spawn ranks", list(where.slice(gpus=1).spawn_rank.call().get().values()))
check("slice range keeps the dim", where.slice(gpus=slice(1, 3)).extent)
check("slice range ranks", ranks(where.slice(gpus=slice(1, 3))))
ranged = where.slice(gpus=slice(1, 3))
check("slice range sizes seen", list(ranged.extent_seen.call().get().values()))
check("slice range spawn ranks", list(ranged.spawn_rank.call().get().values()))
check("slice with a step", ranks(where.slice(gpus=slice(0, 3, 3))))
check("slice outer dim with a step", ranks(where.slice(hosts=slice(1, 2, 2))))
check("slice two dims", where.slice(hosts=1, gpus=slice(0, 2)).extent)
check("slice to one actor", where.slice(hosts=1, gpus=2).rank.call_one().get())
check("slice of a slice", where.slice(hosts=1).slice(gpus=0).spawn_rank.call_one().get())
check("flatten ranks", ranks(where.flatten("rank")))
check("rank zero idiom", where.flatten("rank").slice(rank=0).spawn_rank.call_one().get())
check("rename ranks", ranks(where.rename(hosts="nodes")))
check("split ranks", ranks(where.split(gpus=("pair", "one"), one=1)))
check("split of a slice", where.slice(gpus=slice(0, 2)).split(hosts=("h",)).extent)
check("flatten then split", where.flatten("r").split(r=("a", "b"), b=2).extent)

sub = procs.slice(gpus=slice(0, 2))
on_sub = sub.spawn("on_sub", Where)
check("spawn on a slice extent", on_sub.extent)
check("spawn on a slice ranks", ranks(on_sub))
check("spawn on a slice spawn ranks", list(on_sub.spawn_rank.call().get().values()))

others = procs.spawn("others", Where)
check("pairing by spawn rank", list(where.partner.call(others).get().values()))

raises("slice unknown dim", where.slice, nodes=0)
raises("slice past the end", where.slice, gpus=3)
raises("slice negative", where.slice, gpus=-1)
raises("slice empty range", where.slice, gpus=slice(2, 2))
raises("flatten a sliced mesh", lambda: where.slice(gpus=0).flatten("r"))
raises("split unknown size", where.split, gpus=("a", "b"))
raises("split uneven", where.split, gpus=("a", "b"), b=2)
raises("rename unknown dim", where.rename, nodes="n")
raises("procs slice unknown dim", procs.slice, x=0)
raises("host slice unknown dim", host.slice, hosts=0)
raises("actor mesh indexing", lambda: where[0])
raises("proc mesh indexing", lambda: procs[0])
raises("host mesh indexing", lambda: host[0])
raises("actor mesh iteration", lambda: list(where))
raises("proc mesh iteration", lambda: list(procs))
check("actor mesh truthy", bool(where))
check("proc mesh equals itself", procs == procs)
check("this_host equals this_host", host == this_host())

local = this_proc()
check("this_proc extent", local.extent)
check("this_proc len", len(local))
in_client = local.spawn("in_client", Where)
check("this_proc actor runs in the client", in_client.pid.call_one().get() == os.getpid())
check("this_proc actor rank", in_client.rank.call_one().get())
procs.stop().get()
check("stopped", "yes")
