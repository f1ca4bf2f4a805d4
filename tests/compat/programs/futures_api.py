"""Monarch's ``Future``: blocking and awaiting the results of remote operations.

Follows the "Actors" page's section on futures: ``get()``/``result()`` block, ``await`` and
``as_asyncio()`` work inside asyncio code, a ``get(timeout=)`` that times out does not consume the
future, ``exception()`` returns instead of raising, results and errors are cached, and the
documented misuse errors (direct construction, bad timeouts, awaiting without a loop, ``get()``
inside a running loop warns).
"""

import asyncio
import warnings

from compat import check, raises

from monarch.actor import Actor, ActorError, Channel, Future, endpoint, this_host


class Echo(Actor):
    @endpoint
    def echo(self, x):
        return x

    @endpoint
    def fail(self, msg: str):
        raise ValueError(msg)


procs = this_host().spawn_procs(per_host={"gpus": 2})
echo = procs.spawn("echo", Echo).slice(gpus=0)

fut = echo.echo.call_one(5)
check("future repr", fut)
check("get", fut.get())
check("get again returns the cached value", fut.get())
check("result alias", fut.result())
check("get with timeout", fut.get(timeout=30))
check("exception of a success", fut.exception())
check("isinstance Future", isinstance(fut, Future))
raises("negative timeout on a done future", fut.get, -1)
raises("direct construction", Future)

failing = echo.fail.call_one("boom")
err = failing.exception()
check("exception returns the error type", type(err).__name__)
check("exception is an ActorError", isinstance(err, ActorError))
check("exception wraps the original", repr(err.exception))
try:
    failing.get()
except ActorError as again:
    check("get re-raises the cached exception", again is err)
try:
    failing.result()
except ActorError as again:
    check("result re-raises the cached exception", again is err)

port, receiver = Channel.open()
pending = receiver.recv()
raises("negative timeout", pending.get, -1)
raises("nan timeout", pending.get, float("nan"))
raises("inf timeout", pending.exception, float("inf"))
raises("timeout on a pending future", pending.get, timeout=0.05)
port.send("late")
check("value after a timeout", pending.get())

raises("await without a loop", lambda: next(iter(fut.__await__())))
raises("as_asyncio without a loop", fut.as_asyncio)


async def in_loop() -> list:
    out = []
    f = echo.echo.call_one("x")
    out.append(await f)
    out.append(await f)
    out.append(await f.as_asyncio())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out.append(f.get())
    out.append([(w.category.__name__, str(w.message)) for w in caught])
    mesh = await procs.spawn("echo2", Echo).echo.call(7)
    out.append(list(mesh.values()))
    try:
        await echo.fail.call_one("awaited")
    except ActorError as e:
        out.append(repr(e.exception))
    f2 = echo.echo.call_one("gathered")
    out.append(await asyncio.gather(f2, f2.as_asyncio()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out.append(echo.echo.call_one("blocking").get())
    out.append([(w.category.__name__, str(w.message)) for w in caught])
    return out


check("await, as_asyncio and get in a loop", asyncio.run(in_loop()))


async def two_loops(f) -> str:
    return await f.as_asyncio()


shared = echo.echo.call_one("shared")
async def with_asyncio_helpers() -> list:
    out = []
    out.append(await asyncio.wait_for(echo.echo.call_one("wait_for"), timeout=30))
    futures = [echo.echo.call_one(i) for i in range(3)]
    out.append(sorted([await f for f in asyncio.as_completed([f.as_asyncio() for f in futures])]))
    return out


check("asyncio.wait_for and as_completed", asyncio.run(with_asyncio_helpers()))
check("one future awaited from two loops", [asyncio.run(two_loops(shared)) for _ in range(2)])
procs.stop().get()
