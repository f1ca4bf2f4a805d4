"""Monarch's actors page, nested actors: actors that spawn actors, and who their creator is.

Follows the "Actors" page: an actor spawns its own procs and actors (returning the new actor mesh
to the client, which can call it), ``this_proc()`` inside an actor runs a child in the actor's own
process, ``context().actor_instance`` names the chain of creators (``str`` of the instance and of
its ``creator``), a sync endpoint may block on ``.get()`` without a running loop or a warning
while an async endpoint's ``.get()`` warns, and the message rank each adverb delivers
(``choose``, ``stream``, slices).
"""

import asyncio
import os
import warnings

from compat import check

from monarch.actor import Actor, context, current_rank, current_size, endpoint, this_host, this_proc


class Child(Actor):
    @endpoint
    def who(self) -> tuple:
        me = context().actor_instance
        return (str(me), repr(me.creator), me.creator.name, me.name, repr(me.rank))

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def not_a_mesh(self) -> list:
        out = []
        for attempt in (lambda: self.slice(w=0), lambda: self.extent, lambda: len(self),
                        lambda: self.stop(), lambda: self.sizes):
            try:
                attempt()
                out.append("no error")
            except NotImplementedError as e:
                out.append(f"NotImplementedError: {e}")
        return out

    @endpoint
    def rank(self) -> tuple:
        return (repr(current_rank()), current_size())


class Parent(Actor):
    def __init__(self) -> None:
        self.kids = None

    @endpoint
    def make(self, n: int) -> Child:
        self.kids = this_host().spawn_procs(per_host={"w": n}).spawn("kids", Child)
        return self.kids

    @endpoint
    def kids_who(self) -> list:
        return list(self.kids.who.call().get().values())

    @endpoint
    def local_child(self) -> tuple:
        child = this_proc().spawn("local_kid", Child)
        return (child.pid.call_one().get() == os.getpid(), child.who.call_one().get())

    @endpoint
    def blocking_get(self) -> tuple:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.kids.slice(w=0).pid.call_one().get()
        try:
            asyncio.get_running_loop()
            loop = True
        except RuntimeError:
            loop = False
        return (len(caught), loop)


class AsyncParent(Actor):
    def __init__(self) -> None:
        self.kids = None

    @endpoint
    async def make(self) -> int:
        self.kids = this_host().spawn_procs(per_host={"w": 2}).spawn("akids", Child)
        return len(self.kids)

    @endpoint
    async def awaited(self) -> list:
        return sorted([await f for f in self.kids.rank.stream()])

    @endpoint
    async def blocking_get(self) -> list:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.kids.slice(w=0).pid.call_one().get()
        return [(w.category.__name__, str(w.message)) for w in caught]


parent = this_host().spawn_procs().spawn("parent", Parent)
kids = parent.make.call_one(2).get()
check("mesh returned from an endpoint", kids)
check("returned mesh len", len(kids))
check("an actor object is not a mesh", kids.slice(w=0).not_a_mesh.call_one().get())
check("client calls the returned mesh", len(set(kids.pid.call().get().values())))
check("names of actors spawned by an actor", parent.kids_who.call_one().get())
check("this_proc inside an actor", parent.local_child.call_one().get())
check("sync endpoint blocks on get", parent.blocking_get.call_one().get())
check("parent seen from the client", str(parent))

aparent = this_host().spawn_procs().spawn("aparent", AsyncParent)
check("async parent spawns", aparent.make.call_one().get())
check("async parent awaits its children", aparent.awaited.call_one().get())
check("get in an async endpoint warns", aparent.blocking_get.call_one().get())

procs = this_host().spawn_procs(per_host={"gpus": 3})
kids3 = procs.spawn("kids3", Child)
check("choose message rank", sorted({kids3.rank.choose().get()[1]["gpus"] for _ in range(3)}))
check("stream message ranks", sorted(f.get() for f in kids3.rank.stream()))
check("message rank on a point slice", kids3.slice(gpus=2).rank.call_one().get())
check("message rank on a stepped slice",
      list(kids3.slice(gpus=slice(0, 3, 2)).rank.call().get().values()))
check("spawn rank on a stepped slice",
      [w[4] for w in kids3.slice(gpus=slice(0, 3, 2)).who.call().get().values()])
procs.stop().get()
