"""Monarch's actor errors: what spawn refuses, what a failing endpoint raises, and pickling.

Follows the "Actors" page's sections on errors: class validation at spawn (mixing sync and async
endpoints, an endpoint named like an ActorMesh attribute, a class that is not an Actor), an
``ActorError`` from an endpoint that raised (its message, the original exception, the remote
traceback with chained causes), the actor surviving it, a ``call`` where one rank raises, and
arguments that cannot be pickled (raised at the call site) or unpickled (raised as an
``ActorError``); plus the reprs of actor meshes and the ``str`` of the actor instances.
"""

from compat import check, raises

from monarch.actor import Actor, ActorError, current_rank, endpoint, this_host


class Mixed(Actor):
    @endpoint
    def sync_one(self) -> None:
        pass

    @endpoint
    async def async_one(self) -> None:
        pass


class Collides(Actor):
    @endpoint
    def slice(self) -> None:
        pass


class NotAnActor:
    pass


class SyncWithAsyncCleanup(Actor):
    @endpoint
    def work(self) -> None:
        pass

    async def __cleanup__(self, exc) -> None:
        pass


class AsyncWithSyncCleanup(Actor):
    @endpoint
    async def work(self) -> None:
        pass

    def __cleanup__(self, exc) -> None:
        pass


class SyncWithAsyncSupervise(Actor):
    @endpoint
    def work(self) -> None:
        pass

    async def __supervise__(self, failure) -> bool:
        return True


class NeedsArgs(Actor):
    def __init__(self, x: int, *, y: int = 0) -> None:
        self.total = x + y

    @endpoint
    def total_of(self) -> int:
        return self.total


class Base(Actor):
    @endpoint
    def hello(self) -> str:
        return "base hello"

    @endpoint
    def over(self) -> str:
        return "base over"


class Derived(Base):
    @endpoint
    def over(self) -> str:
        return "derived over"


class PlainOverride(Base):
    def over(self) -> str:
        return "plain"


class Fails(Actor):
    @endpoint
    def chained(self, msg: str) -> None:
        try:
            raise KeyError("inner")
        except KeyError as e:
            raise ValueError(msg) from e

    @endpoint
    def during(self) -> None:
        try:
            raise KeyError("first")
        except KeyError:
            raise RuntimeError("second")  # noqa: B904 - the point: an implicit __context__

    @endpoint
    def on_rank(self, bad: int) -> int:
        if current_rank().rank == bad:
            raise IndexError(f"rank {bad} refuses")
        return current_rank().rank

    @endpoint
    def echo(self, x):
        return x

    @endpoint
    def unpicklable_result(self):
        import threading

        return threading.Lock()


class CannotPickle:
    def __getstate__(self):
        raise RuntimeError("CannotPickle refuses to be pickled")


def _fail_to_rebuild():
    raise ValueError("cannot be rebuilt on the receiver")


class CannotUnpickle:
    def __reduce__(self):
        return (_fail_to_rebuild, ())


procs = this_host().spawn_procs(per_host={"gpus": 2})
raises("mixing sync and async endpoints", procs.spawn, "mixed", Mixed)
try:
    procs.spawn("collides", Collides)
except ValueError as e:
    check("endpoint named like a mesh attribute", str(e).split(",")[0])
raises("spawning a non-Actor class", procs.spawn, "plain", NotAnActor)
raises("spawning a non-class", procs.spawn, "three", 3)
raises("spawn name that is not a str", procs.spawn, 3, Base)
raises("sync endpoints, async __cleanup__", procs.spawn, "c1", SyncWithAsyncCleanup)
raises("async endpoints, sync __cleanup__", procs.spawn, "c2", AsyncWithSyncCleanup)
raises("sync endpoints, async __supervise__", procs.spawn, "s1", SyncWithAsyncSupervise)
raises("spawn missing an __init__ argument", procs.spawn, "args1", NeedsArgs)
raises("spawn with an unknown __init__ keyword", procs.spawn, "args2", NeedsArgs, 1, z=2)
check("spawn with __init__ arguments",
      list(procs.spawn("args3", NeedsArgs, 1, y=2).total_of.call().get().values()))
derived = procs.spawn("derived", Derived)
check("inherited endpoint", derived.slice(gpus=0).hello.call_one().get())
check("overridden endpoint", derived.slice(gpus=0).over.call_one().get())
check("endpoint on the class is the descriptor",
      (type(Derived.over).__name__, Derived.over._method.__name__,
       Derived.over._explicit_response_port))
plain = procs.spawn("plain_override", PlainOverride)
check("endpoint overridden by a plain method", type(plain.over).__name__)
raises("adverb of a plain override", lambda: plain.over.call_one())

fails = procs.spawn("fails", Fails)
check("actor mesh repr", fails)
check("actor mesh str", str(fails))
check("sliced actor mesh repr", fails.slice(gpus=1))
first = fails.slice(gpus=0)
try:
    first.chained.call_one("outer").get()
except ActorError as e:
    text = str(e)
    check("ActorError message", e.message)
    check("ActorError exception", repr(e.exception))
    check("ActorError repr", repr(e))
    check("ActorError first line", text.splitlines()[0])
    check("ActorError second line", text.splitlines()[1])
    check("ActorError traceback header",
          "Traceback of where the remote call failed (most recent call last):" in text)
    check("ActorError keeps the cause", "KeyError: 'inner'" in text)
    check("ActorError cause phrase",
          "The above exception was the direct cause of the following exception" in text)
    check("ActorError last line", text.rstrip().splitlines()[-1])
    check("ActorError is an Exception", isinstance(e, Exception))
try:
    first.during.call_one().get()
except ActorError as e:
    check("ActorError context phrase",
          "During handling of the above exception, another exception occurred" in str(e))
    check("ActorError context message", e.message)
check("actor survives an exception", first.echo.call_one("still alive").get())
try:
    fails.on_rank.call(1).get()
except ActorError as e:
    check("call where one rank raises", (e.message, repr(e.exception)))
check("other ranks unaffected", fails.slice(gpus=0).on_rank.call_one(1).get())
check("stream, one rank raises", sorted(repr(f.exception()) for f in fails.on_rank.stream(0)
                                         if f.exception() is not None))

raises("argument that cannot be pickled", first.echo.call_one, CannotPickle())
try:
    first.echo.call_one(CannotUnpickle()).get()
except ActorError as e:
    check("argument that cannot be unpickled", (e.message, repr(e.exception)))
try:
    first.unpicklable_result.call_one().get()
except ActorError as e:
    check("result that cannot be pickled", (e.message, type(e.exception).__name__))
check("lambda argument runs remotely", first.echo.call_one(lambda: 41 + 1).get()())
check("actor alive after pickling errors", first.echo.call_one(1).get())
procs.stop().get()
