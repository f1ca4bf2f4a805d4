"""Monarch's getting-started walk-through, first part: spawn procs, spawn actors, call them.

Follows the "Getting started" page: a host's procs (``this_host().spawn_procs``), an actor class
with endpoints, the ``call``/``call_one``/``broadcast`` adverbs, and slicing the actor mesh.
"""

from compat import check, raises

from monarch.actor import Actor, current_rank, endpoint, this_host


class Counter(Actor):
    def __init__(self, initial: int) -> None:
        self.value = initial

    @endpoint
    def incr(self) -> None:
        self.value += 1

    @endpoint
    def get(self) -> int:
        return self.value

    @endpoint
    def rank(self) -> dict:
        return dict(current_rank())


procs = this_host().spawn_procs(per_host={"gpus": 4})
counters = procs.spawn("counters", Counter, 0)

counters.incr.broadcast()
values = counters.get.call().get()
check("values after one broadcast incr", list(values.values()))
check("value mesh repr", values)
check("item of rank 2", values.item(gpus=2))

one = counters.slice(gpus=1)
one.incr.call_one().get()
check("call_one on a slice", one.get.call_one().get())
check("everyone after slice incr", list(counters.get.call().get().values()))
check("current_rank on each", [r for _, r in counters.rank.call().get().items()])
raises("call_one on the whole mesh", counters.get.call_one)
procs.stop().get()
check("stopped", "yes")
