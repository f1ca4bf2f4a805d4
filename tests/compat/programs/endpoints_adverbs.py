"""Monarch's endpoints and adverbs: every way to invoke an endpoint, and the argument checks.

Follows the "Actors" page's endpoint sections: ``call``, ``call_one``, ``choose``, ``stream``,
``broadcast`` and the low-level ``send`` with a port; ``Accumulator``; ``as_endpoint`` on a method
not marked as an endpoint; ``@concurrent_endpoint`` (a body waiting on an event released by a later
message); ``explicit_response_port`` endpoints answering through their port (at once, later from
another thread, from an async body); and what a mis-called endpoint raises at the call site.
"""

import asyncio
import operator
import threading

from compat import check, raises

from monarch.actor import (
    Accumulator,
    Actor,
    Channel,
    Endpoint,
    Future,
    Port,
    PortReceiver,
    ValueMesh,
    as_endpoint,
    concurrent_endpoint,
    current_rank,
    endpoint,
    send,
    this_host,
)


class Calc(Actor):
    def __init__(self, base: int) -> None:
        self.base = base

    @endpoint
    def add(self, a: int, b: int = 1, *, c: int = 0) -> int:
        return self.base + a + b + c

    @endpoint
    def rank(self) -> int:
        return current_rank()["gpus"]

    @endpoint
    def star(self, *args: int, **kwargs: int) -> tuple:
        return (args, sorted(kwargs.items()))

    @endpoint
    def kwonly(self, *, key: str) -> str:
        return key.upper()

    def plain(self, x: int) -> int:
        return x * 100 + current_rank().rank

    @endpoint(explicit_response_port=True)
    def ported(self, port, b: int) -> None:
        port.send(3 + b)

    @endpoint(explicit_response_port=True)
    def later(self, port, b: int) -> None:
        threading.Thread(target=port.send, args=(b * 2,)).start()


class Waiter(Actor):
    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.log: list = []

    @concurrent_endpoint
    async def wait(self) -> str:
        self.log.append("waiting")
        await self.event.wait()
        self.log.append("released")
        return "done waiting"

    @endpoint
    async def release(self) -> None:
        self.event.set()

    @endpoint
    async def history(self) -> list:
        return list(self.log)

    @endpoint(explicit_response_port=True)
    async def aported(self, port, x: int) -> None:
        await asyncio.sleep(0)
        port.send(x + 1)

    @concurrent_endpoint(explicit_response_port=True)
    async def cported(self, port, x: int) -> None:
        port.send(x * 10)

    @concurrent_endpoint
    async def cfail(self, msg: str) -> None:
        await asyncio.sleep(0)
        raise ValueError(msg)

    @endpoint(explicit_response_port=True)
    async def port_exception(self, port, msg: str) -> None:
        port.exception(ValueError(msg))


def typed_call(ep: Endpoint[[int], int], x: int) -> Future[ValueMesh[int]]:
    """Annotated as torchmonarch types endpoints: Endpoint[P, R] (evaluated at definition)."""
    return ep.call(x)


def typed_fold(acc: Accumulator[[], int, int], port: Port[int], rec: PortReceiver[int]) -> None:
    pass


procs = this_host().spawn_procs(per_host={"gpus": 3})
calc = procs.spawn("calc", Calc, 100)
first = calc.slice(gpus=0)

check("endpoint repr", calc.add)
check("plain method repr", calc.plain)
check("call through Endpoint[[int], int] annotation", list(typed_call(calc.add, 1).get().values()))
check("call positional", list(calc.add.call(1).get().values()))
check("call with defaults overridden", list(calc.add.call(1, 2, c=3).get().values()))
check("call_one kwargs", first.add.call_one(a=5, b=5).get())
check("choose", calc.add.choose(0, 0).get())
check("stream ranks sorted", sorted(f.get() for f in calc.rank.stream()))
check("varargs endpoint", first.star.call_one(1, 2, x=3).get())
check("keyword-only endpoint", first.kwonly.call_one(key="abc").get())
calc.add.broadcast(1)
check("broadcast returns", calc.add.broadcast(2))

port, receiver = Channel.open()
send(calc.rank, (), {}, port=port)
check("send to a port, all ranks", sorted(receiver.recv().get() for _ in range(3)))
send(calc.add, (1,), {"c": 2}, port=port, selection="choose")
check("send with choose", receiver.recv().get())
ranked_port, ranked = Channel.open_ranked()
send(calc.rank, (), {}, port=ranked_port)
check("send to a ranked port", sorted(ranked.recv().get() for _ in range(3)))
check("send without port", send(calc.add, (1,), {}))

acc = Accumulator(calc.rank, 0, operator.add)
check("accumulator repr", acc)
check("accumulate sum", acc.accumulate().get())
check("accumulate with args", Accumulator(calc.add, 1000, operator.add).accumulate(1, c=1).get())
check("accumulate list fold",
      sorted(Accumulator(calc.rank, [], lambda acc, r: [*acc, r]).accumulate().get()))

check("as_endpoint call", list(as_endpoint(calc.plain).call(4).get().values()))
check("as_endpoint call_one", as_endpoint(first.plain).call_one(5).get())
raises("as_endpoint of an endpoint", as_endpoint, calc.add)

check("explicit port call_one", first.ported.call_one(2).get())
check("explicit port call", list(calc.ported.call(1).get().values()))
check("explicit port answered from a thread", first.later.call_one(21).get())

waiter = procs.slice(gpus=0).spawn("waiter", Waiter)
pending = waiter.wait.call_one()
# The release is a later message: it runs while the concurrent body waits, or nothing ends.
check("release runs while concurrent body waits", waiter.release.call_one().get())
check("concurrent endpoint result", pending.get())
check("history after release", waiter.history.call_one().get())
check("async explicit port", waiter.aported.call_one(1).get())
check("concurrent explicit port", waiter.cported.call_one(4).get())
try:
    waiter.cfail.call_one("concurrent body raised").get()
except Exception as e:
    check("concurrent endpoint error", (type(e).__name__, e.message, repr(e.exception)))
raises("explicit port answered with an exception", waiter.port_exception.call_one("answered").get)
check("waiter alive after errors", waiter.aported.call_one(10).get())

raises("missing argument", calc.add.call)
raises("too many positional", calc.add.call, 1, 2, 3)
raises("unexpected keyword", first.add.call_one, 1, d=4)
raises("unexpected keyword, call", calc.add.call, 1, d=4)
raises("missing keyword-only", first.kwonly.call_one)
raises("call_one on 3 actors", calc.add.call_one, 1)
raises("calling a plain method", calc.plain, 1)
raises("plain method adverb", lambda: calc.plain.call(1))
raises("unknown attribute", lambda: calc.nope)
raises("explicit port wrong args", first.ported.call_one)
raises("calling an endpoint directly", calc.add, 1)
raises("send bad selection", send, calc.add, (1,), {}, selection="bad")
raises("as_endpoint of a non-method", as_endpoint, 3)
raises("concurrent_endpoint on sync", concurrent_endpoint, lambda self: 1)


def _plain(self):
    pass


raises("concurrent_endpoint on endpoint", concurrent_endpoint, endpoint(_plain))
check("first call after errors", first.add.call_one(0).get())
procs.stop().get()
