"""Supervision, part one: what callers, the fault hook and later callers see when an endpoint fails.

Follows Monarch's supervision documentation ("Error handling in Monarch" and the actors guide's
table of endpoint outcomes): an `Exception` with a reply port becomes an `ActorError` and the
actor lives on; an `Exception` with no reply port (`broadcast`), one escaping an
`explicit_response_port=True` endpoint (sync, async or `@concurrent_endpoint`), or a
`BaseException` fails the actor: every call still waiting on it (the failing call, calls over
several ranks, `stream`, calls queued behind it, a port a thread still holds) resolves with a
`SupervisionError`, `unhandled_fault_hook` (replaced by the program) hears of it once per failed
rank, and later calls fail at once. Report texts carry a traceback whose frames differ between
implementations: `brief` keeps its first and last lines.
"""

import re
import threading

from _supervision import (
    WAIT,
    get,
    hooked,
    no_other_faults,
    record_faults,
    spawn_fresh,
    stop_fresh_procs,
)
from compat import check, outcome

from monarch.actor import Actor, concurrent_endpoint, current_rank, endpoint

record_faults(with_report=True)


class Boom(BaseException):
    """Not an Exception: always fails the actor."""


class SyncWorker(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def raises(self) -> None:
        raise ValueError("plain failure")

    @endpoint
    def raises_base(self) -> None:
        raise Boom("base failure")

    @endpoint(explicit_response_port=True)
    def explicit(self, port, x: int) -> None:
        raise ValueError(f"explicit sync {x}")

    @endpoint(explicit_response_port=True)
    def rank1_fails(self, port) -> None:
        if current_rank().rank == 1:
            raise ValueError("rank 1 failed")
        port.send(current_rank().rank)

    @endpoint(explicit_response_port=True)
    def held_by_thread(self, port) -> None:
        gate = threading.Event()
        # The thread keeps the port and never answers through it.
        self.keeper = threading.Thread(target=lambda held=port: gate.wait(), daemon=True)
        self.keeper.start()
        raise ValueError("failed while a thread held the port")

    @endpoint
    def slow_then_base(self) -> None:
        threading.Event().wait(1.0)  # let the calls behind this one queue up
        raise Boom("failed with calls queued")


class AsyncWorker(Actor):
    @endpoint
    async def ping(self) -> str:
        return "pong"

    @endpoint(explicit_response_port=True)
    async def explicit(self, port, x: int) -> None:
        raise ValueError(f"explicit async {x}")

    @concurrent_endpoint(explicit_response_port=True)
    async def concurrent(self, port, x: int) -> None:
        raise ValueError(f"explicit concurrent {x}")

    @concurrent_endpoint
    async def concurrent_plain(self) -> None:
        raise ValueError("concurrent without port")


# An Exception with a reply port: ActorError for the caller, the actor lives on.
plain = spawn_fresh("plain", SyncWorker, gpus=2)
check("ping before any failure", get(plain.slice(gpus=0).ping.call_one()))
err = outcome(plain.slice(gpus=0).raises.call_one().get, timeout=WAIT)
check("exception with reply port, first line", err.split("\n")[0])
check("exception with reply port, last line", err.rstrip("\n").split("\n")[-1])
check("actor lives on after an ActorError", get(plain.slice(gpus=0).ping.call_one()))
conc = spawn_fresh("conc", AsyncWorker, gpus=2)
check("concurrent endpoint without port forwards the error",
      outcome(conc.slice(gpus=1).concurrent_plain.call_one().get, timeout=WAIT).split("\n")[0])

# Explicit response ports: sync, async, concurrent. The call resolves; the hook hears once.
sync_mesh = spawn_fresh("sync_explicit", SyncWorker, gpus=2)
check("explicit sync endpoint raising", get(sync_mesh.slice(gpus=0).explicit.call_one(7)))
check("hook for explicit sync", hooked(1))
check("later call to the failed rank", get(sync_mesh.slice(gpus=0).ping.call_one()))
check("the other rank still answers", get(sync_mesh.slice(gpus=1).ping.call_one()))
check("later call to the whole mesh", get(sync_mesh.ping.call()))

async_mesh = spawn_fresh("async_explicit", AsyncWorker, gpus=2)
check("explicit async endpoint raising", get(async_mesh.slice(gpus=1).explicit.call_one(8)))
check("hook for explicit async", hooked(1))

conc_mesh = spawn_fresh("conc_explicit", AsyncWorker, gpus=2)
check("explicit concurrent endpoint raising", get(conc_mesh.slice(gpus=0).concurrent.call_one(9)))
check("hook for explicit concurrent", hooked(1))
check("later call after concurrent failure", get(conc_mesh.slice(gpus=0).ping.call_one()))

# Over several ranks: call raises the failed rank's error; stream gives one outcome per rank.
gather = spawn_fresh("gather", SyncWorker, gpus=2)
check("call where rank 1 fails", get(gather.rank1_fails.call()))
check("hook for the call", hooked(1))
streamed = spawn_fresh("streamed", SyncWorker, gpus=2)
check("stream where rank 1 fails", sorted(get(f) for f in streamed.rank1_fails.stream()))
check("hook for the stream", hooked(1))
chosen = spawn_fresh("chosen", SyncWorker, gpus=2)
check("choose on the healthy rank", get(chosen.slice(gpus=0).rank1_fails.choose()))

# A thread still holds the port when the endpoint raises.
held = spawn_fresh("held", SyncWorker, gpus=2)
check("port held by a thread", get(held.slice(gpus=1).held_by_thread.call_one()))
check("hook for the held port", hooked(1))

# BaseException: the caller waits and gets SupervisionError; so do the calls queued behind it.
base = spawn_fresh("base", SyncWorker, gpus=2)
check("BaseException with reply port", get(base.slice(gpus=0).raises_base.call_one()))
check("hook for the BaseException", hooked(1))
queued = spawn_fresh("queued", SyncWorker, gpus=2)
one = queued.slice(gpus=0)
first, second, third = one.slow_then_base.call_one(), one.ping.call_one(), one.ping.call_one()
check("the failing call", get(first))
check("queued calls behind it", [get(second), get(third)])
check("hook for the queued failure", hooked(1))

# An Exception with no reply port (broadcast) fails the actor.
bcast = spawn_fresh("bcast", SyncWorker, gpus=2)
bcast.raises.broadcast()
check("hook for a failed broadcast on both ranks", hooked(2))
# Calls show the mesh's first failure; which rank failed first is a race: mask the rank.
check("call after the broadcast failure",
      re.sub(r"\{'gpus': \d/2\}", "{'gpus': ?/2}", get(bcast.slice(gpus=0).ping.call_one())))

check("no other fault reached the hook", no_other_faults())
stop_fresh_procs()
check("done", "yes")
