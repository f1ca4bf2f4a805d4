"""Patterns from Monarch's example programs: ping-pong, fan-in through a port, pairing meshes.

Follows the examples gallery's actor programs: two actor meshes playing ping-pong, each actor
addressing its peer with ``other.slice(**context().actor_instance.rank)``; a mesh handed to
actors as a spawn argument; actors that spawn their children in ``__init__``; a port fanned in
from every rank (the cookbook's ``[10, 11, 12, 20, ...]``); rank 0 picked with
``flatten("rank").slice(rank=0)``; and a shared controller used as a work queue by many actors
(the crawler example's shape).
"""

from compat import check

from monarch.actor import (
    Actor,
    Channel,
    Port,
    context,
    endpoint,
    get_or_spawn_controller,
    this_host,
)


class Player(Actor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.hits = 0

    @endpoint
    def serve(self, other: "Player", rounds: int) -> list:
        peer = other.slice(**context().actor_instance.rank)
        log = []
        for _ in range(rounds):
            log.append(peer.hit.call_one(self.name).get())
        return log

    @endpoint
    def hit(self, by: str) -> str:
        self.hits += 1
        return f"{self.name}{context().actor_instance.rank.rank} hit {self.hits} by {by}"


class Holder(Actor):
    def __init__(self, players: Player) -> None:
        self.players = players

    @endpoint
    def ask(self) -> list:
        return sorted(self.players.hit.call("holder").get().values())


class WithChildren(Actor):
    def __init__(self, n: int) -> None:
        self.children = this_host().spawn_procs(per_host={"kids": n}).spawn("kids", Player, "kid")

    @endpoint
    def count(self) -> int:
        return sum(1 for _ in self.children.hit.call("parent").get().values())


class FanIn(Actor):
    @endpoint
    def report(self, port: Port) -> None:
        rank = context().actor_instance.rank["gpus"]
        for i in range(3):
            port.send((rank + 1) * 10 + i)


class Queue(Actor):
    def __init__(self, items: list) -> None:
        self.items = list(items)
        self.done: list = []

    @endpoint
    def take(self):
        return self.items.pop(0) if self.items else None

    @endpoint
    def finish(self, item, by: int) -> None:
        self.done.append((item, by))

    @endpoint
    def results(self) -> list:
        return sorted(self.done)


class Worker(Actor):
    @endpoint
    def drain(self) -> int:
        queue = get_or_spawn_controller("queue", Queue, []).get()
        count = 0
        while True:
            item = queue.take.call_one().get()
            if item is None:
                return count
            queue.finish.call_one(item.upper(), 1).get()
            count += 1


procs = this_host().spawn_procs(per_host={"gpus": 2})
pings = procs.spawn("ping", Player, "ping")
pongs = procs.spawn("pong", Player, "pong")
check("ping-pong log", list(pings.serve.call(pongs, 2).get().values()))
check("pong hits by rank", list(pongs.hit.call("client").get().values()))

holder = procs.slice(gpus=0).spawn("holder", Holder, pongs)
check("mesh as a spawn argument", holder.ask.call_one().get())

parent = this_host().spawn_procs().spawn("with_children", WithChildren, 3)
check("children spawned in __init__", parent.count.call_one().get())

fan = this_host().spawn_procs(per_host={"gpus": 3}).spawn("fan", FanIn)
port, receiver = Channel.open()
fan.report.broadcast(port)
check("port fan-in", sorted(receiver.recv().get() for _ in range(9)))
check("rank 0 via flatten", fan.flatten("rank").slice(rank=0).report.call_one(port).get())
check("rank 0 reported", sorted(receiver.recv().get() for _ in range(3)))

queue = get_or_spawn_controller("queue", Queue, ["a", "b", "c", "d", "e"]).get()
workers = procs.spawn("workers", Worker)
check("every item drained once", sum(workers.drain.call().get().values()))
check("queue results", [item for item, _ in queue.results.call_one().get()])
procs.stop().get()
