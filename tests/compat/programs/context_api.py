"""Monarch's context API: who is running, and where the current message was cast.

Follows the "Actors" page's context section: ``context()``, ``context().actor_instance`` (its
name, rank, creator, ``str``), ``context().message_rank``, ``current_rank()``, ``current_size()``
and ``current_actor_name()`` in the client, in actors, in ``__init__`` and for messages sent to
slices; ``get_or_spawn_controller`` singletons (same pid as the client, one per name, from the
client and from inside actors).
"""

import os

from compat import check

from monarch.actor import (
    Actor,
    context,
    current_actor_name,
    current_rank,
    current_size,
    endpoint,
    get_or_spawn_controller,
    this_host,
)


class Where(Actor):
    def __init__(self) -> None:
        self.init_rank = dict(current_rank())
        self.init_size = current_size()

    @endpoint
    def init_seen(self) -> tuple:
        return (self.init_rank, self.init_size)

    @endpoint
    def where(self) -> dict:
        ctx = context()
        inst = ctx.actor_instance
        return {
            "name": inst.name,
            "rank": repr(inst.rank),
            "message_rank": repr(ctx.message_rank),
            "current_rank": repr(current_rank()),
            "current_size": current_size(),
            "str": str(inst),
            "creator": inst.creator.name,
        }

    @endpoint
    def actor_name(self) -> str:
        return current_actor_name()

    @endpoint
    def rank_sum(self, f) -> int:
        return f()


class Registry(Actor):
    def __init__(self, label: str) -> None:
        self.label = label
        self.items: list = []

    @endpoint
    def add(self, item: str) -> list:
        self.items.append(item)
        return list(self.items)

    @endpoint
    def info(self) -> tuple:
        return (self.label, os.getpid())


class UsesRegistry(Actor):
    @endpoint
    def register(self, item: str) -> list:
        registry = get_or_spawn_controller("registry", Registry, "first").get()
        return registry.add.call_one(item).get()

    @endpoint
    def nested(self) -> str:
        inner = get_or_spawn_controller("inner", Registry, "made inside an actor").get()
        return inner.info.call_one().get()[0]


ctx = context()
check("client instance str", str(ctx.actor_instance))
check("client instance name", ctx.actor_instance.name)
check("client instance repr", repr(ctx.actor_instance))
check("context repr", ctx)
check("client message_rank", ctx.message_rank)
check("client current_rank", current_rank())
check("client current_size", current_size())

procs = this_host().spawn_procs(per_host={"hosts": 1, "gpus": 2})
where = procs.spawn("where", Where)
for point, info in where.where.call().get().items():
    check(f"actor context at rank {point.rank}", (point, info))
check("context for a point slice", where.slice(gpus=1).where.call_one().get())
check("context for a range slice",
      list(where.slice(gpus=slice(1, 2)).where.call().get().values()))
check("current_rank in __init__", list(where.init_seen.call().get().values()))
check("rank string via flatten",
      str(where.where.call().get().flatten("r").slice(r=1).item()["rank"]))
names = list(where.actor_name.call().get().values())
check("current_actor_name distinct per rank", len(set(names)) == len(names))
check("current_actor_name is a str", all(isinstance(n, str) for n in names))
check("rank via lambda", sum(where.rank_sum.call(lambda: current_rank()["gpus"]).get().values()))
check("size via lambda", sum(where.rank_sum.call(lambda: current_size()["gpus"]).get().values()))

registry = get_or_spawn_controller("registry", Registry, "first").get()
check("controller lives in the client process", registry.info.call_one().get()[1] == os.getpid())
check("controller call", registry.add.call_one("from client").get())
again = get_or_spawn_controller("registry", Registry, "second").get()
check("same name gives the same controller", again.info.call_one().get()[0])
users = procs.spawn("users", UsesRegistry)
check("controller from inside an actor", users.slice(hosts=0, gpus=0).register.call_one("a").get())
check("controller made inside an actor", users.slice(hosts=0, gpus=1).nested.call_one().get())
check("that controller from the client",
      get_or_spawn_controller("inner", Registry, "client").get().info.call_one().get()[0])

class NotAnActor:
    pass


for label, make in [
    ("controller of a non-Actor class", lambda: get_or_spawn_controller("bad", NotAnActor)),
    ("controller with a non-str name", lambda: get_or_spawn_controller(3, Registry, "x")),
    ("controller with bad __init__ arguments",
     lambda: get_or_spawn_controller("badargs", Registry, 1, 2, 3)),
]:
    try:
        make().get()
    except Exception as e:
        check(label, (type(e).__name__, str(e).splitlines()[0], repr(e.exception)))
check("controller len and repr", (len(registry), str(registry)))
procs.stop().get()
