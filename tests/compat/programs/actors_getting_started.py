"""Monarch's getting-started guide and actors page: defining, spawning and composing actors.

Follows "Getting started" (actors with state, sync and async endpoints, ``call``/``call_one``/
``choose``/``stream``/``broadcast``, ``len`` and slicing an actor mesh) and the "Actors" page
(actors that spawn actors, actor meshes passed to other actors, ``this_proc()`` running actors in
the client's own process, per-actor thread-local state, the actor's ``logger``).
"""

import asyncio
import os
import threading

from compat import check

from monarch.actor import Actor, endpoint, this_host, this_proc


class Counter(Actor):
    def __init__(self, initial: int) -> None:
        self.value = initial

    @endpoint
    def incr(self) -> None:
        self.value += 1

    @endpoint
    def get(self) -> int:
        return self.value


class AsyncCounter(Actor):
    def __init__(self) -> None:
        self.value = 0

    @endpoint
    async def incr(self, by: int = 1) -> int:
        await asyncio.sleep(0)
        self.value += by
        return self.value

    @endpoint
    async def get(self) -> int:
        return self.value


class Reader(Actor):
    """Gets an actor mesh as an argument and calls it (the "passing actors" pattern)."""

    @endpoint
    def total(self, counters: Counter) -> int:
        return sum(f.get() for f in counters.get.stream())

    @endpoint
    def one(self, counters: Counter) -> list:
        return list(counters.get.call().get().values())


class Parent(Actor):
    """Spawns its own procs and a child actor mesh on them, from inside an endpoint."""

    def __init__(self) -> None:
        self.children = None

    @endpoint
    def make_children(self, n: int) -> int:
        procs = this_host().spawn_procs(per_host={"workers": n})
        self.children = procs.spawn("children", Counter, 10)
        self.children.incr.broadcast()
        return len(self.children)

    @endpoint
    def child_values(self) -> list:
        return list(self.children.get.call().get().values())


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


class Local(Actor):
    """Thread-local state set in __init__ is seen by later endpoints (one thread per actor)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.local.count = 0

    @endpoint
    def bump(self) -> int:
        self.local.count += 1
        return self.local.count


class Logs(Actor):
    @endpoint
    def logger_info(self) -> tuple:
        return (self.logger.name, self.logger.level)


procs = this_host().spawn_procs(per_host={"gpus": 4})
counters = procs.spawn("counters", Counter, 3)
check("len of actor mesh", len(counters))
check("actor mesh sizes", counters.sizes)
check("actor mesh extent", counters.extent)
counters.incr.broadcast()
check("call after broadcast", list(counters.get.call().get().values()))
check("choose after broadcast", counters.get.choose().get())
check("stream sum", sum(f.get() for f in counters.get.stream()))
check("stream yields one future per actor", len(list(counters.get.stream())))
one = counters.slice(gpus=2)
one.incr.call_one().get()
check("slice then call_one", one.get.call_one().get())
check("sliced mesh len", len(counters.slice(gpus=slice(1, 3))))
check("call on a range slice", list(counters.slice(gpus=slice(1, 3)).get.call().get().values()))
check("values after slice call", list(counters.get.call().get().values()))

acounters = procs.spawn("acounters", AsyncCounter)
check("async endpoint call", list(acounters.incr.call(2).get().values()))
check("async endpoint kwargs", acounters.slice(gpus=0).incr.call_one(by=5).get())
check("async get", list(acounters.get.call().get().values()))


async def awaited() -> list:
    first = await acounters.slice(gpus=1).get.call_one()
    mesh = await acounters.get.call()
    return [first, list(mesh.values())]


check("await adverbs in asyncio.run", asyncio.run(awaited()))

readers = procs.spawn("readers", Reader)
check("mesh passed to actors, streamed", list(readers.total.call(counters).get().values()))
check("slice passed to an actor", readers.slice(gpus=0).one.call_one(counters.slice(gpus=2)).get())

parent = this_host().spawn_procs().spawn("parent", Parent)
check("actor spawns procs and actors", parent.make_children.call_one(3).get())
check("child values via parent", parent.child_values.call_one().get())

here = this_proc().spawn("here", Pid)
check("this_proc actor runs in client process", here.pid.call_one().get() == os.getpid())
elsewhere = procs.spawn("pids", Pid)
pids = list(elsewhere.pid.call().get().values())
check("spawned procs are distinct processes", (len(set(pids)), os.getpid() in pids))

local = procs.slice(gpus=0).spawn("local", Local)
check("thread-local state persists", [local.bump.call_one().get() for _ in range(4)])
check("actor logger", procs.slice(gpus=0).spawn("logs", Logs).logger_info.call_one().get())

procs.stop().get()
check("procs stopped", "yes")
