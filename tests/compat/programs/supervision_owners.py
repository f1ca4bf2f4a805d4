"""Supervision, part two: owners, `__supervise__`, `__init__` failures, proc death, stop, cleanup.

Follows Monarch's supervision documentation: an actor that spawns a mesh owns it and hears of
its failures in `__supervise__` (returning True handles the failure; a falsy return fails the
owner, whose own owner, here the client's `unhandled_fault_hook`, then hears of it); an actor
whose `__init__` raises fails on every rank; a proc that exits (`os._exit` inside an endpoint)
fails its actors and the pending call; `stop()` of an actor mesh runs `__cleanup__` and later
calls fail; `context().actor_instance.abort()` fails the actor with its reason. Last, ports held
by a failing actor: torchmonarch 0.7.0 leaves those waits hanging, ours resolves them
(`ours_only`). Report texts carry tracebacks whose frames differ: `brief` keeps their ends.
"""

import os
import re
import signal

from _supervision import (
    WAIT,
    brief,
    get,
    hooked,
    no_other_faults,
    record_faults,
    spawn_fresh,
    stop_fresh_procs,
)
from compat import check, ours_only, outcome

from monarch.actor import Actor, Channel, context, endpoint, this_host

record_faults(with_report=True)


class Boom(BaseException):
    """Not an Exception: always fails the actor."""


class Child(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def die(self) -> None:
        raise Boom("child died")

    @endpoint
    def kill_proc(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class Parent(Actor):
    """Owns a child mesh; `mode` decides what `__supervise__` does."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.seen: list = []
        self.child = this_host().spawn_procs(per_host={"gpus": 1}).spawn("kid", Child)

    @endpoint
    def start(self) -> str:
        return self.child.ping.call_one().get()

    @endpoint
    def fail_child(self) -> None:
        self.child.die.broadcast()

    @endpoint
    def kill_child_proc(self) -> None:
        self.child.kill_proc.broadcast()

    def _handle_undeliverable_message(self, message) -> bool:
        # torchmonarch 0.7.0 may bounce a call to the failed child back as undeliverable; the
        # call itself already raised, so swallow the bounce.
        return True

    @endpoint
    def alive(self) -> str:
        return "alive"

    @endpoint
    def seen_failures(self) -> list:
        return self.seen

    @endpoint
    def call_child(self) -> str:
        return get(self.child.ping.call_one())

    def __supervise__(self, failure) -> bool:
        if failure.mesh_name.startswith("logger"):
            return True  # torchmonarch 0.7.0's own per-proc mesh: not the user's
        self.seen.append(brief(str(failure)))
        if self.mode == "raise":
            raise ValueError("supervise raised")
        return self.mode == "handle"


class BadInit(Actor):
    def __init__(self) -> None:
        raise ValueError("cannot start")

    @endpoint
    def ping(self) -> str:
        return "pong"


class Exiter(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def exit_proc(self) -> None:
        os._exit(3)


class Aborter(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def abort_with(self, reason) -> None:
        context().actor_instance.abort(reason)


class Cleaner(Actor):
    def __init__(self, port) -> None:
        self.port = port

    @endpoint
    def ping(self) -> str:
        return "pong"

    def __cleanup__(self, exc) -> None:
        self.port.send(f"cleanup ran with {exc!r}")


class FailingCleaner(Actor):
    """Its `__cleanup__` reports the exception it gets when the actor failed."""

    def __init__(self, port) -> None:
        self.port = port

    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def die(self) -> None:
        raise Boom("died before cleanup")

    def __cleanup__(self, exc) -> None:
        self.port.send(f"{type(exc).__name__}: {exc}")


class Holder(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def hold(self, port) -> None:
        self.kept = port

    @endpoint
    def fail_holding(self, port) -> None:
        self.kept = port
        raise Boom("failed holding a port")

    @endpoint(explicit_response_port=True)
    def relay(self, port, other) -> None:
        other.hold.call_one(port).get()


# __supervise__ returning True: the owner handles it and lives; the child's calls fail.
handler = spawn_fresh("handler", Parent, "handle")
check("owner starts its child", get(handler.start.call_one()))
handler.fail_child.call_one().get()
check("owner calls its failed child", get(handler.call_child.call_one()))
check("what __supervise__ saw", get(handler.seen_failures.call_one()))
check("owner lives on after handling", get(handler.alive.call_one()))

# The child's proc is killed: the owner hears of it, named after the child actor.
killer = spawn_fresh("killer", Parent, "handle")
killer.start.call_one().get()
killer.kill_child_proc.call_one().get()
while get(killer.seen_failures.call_one()) == "returned []":
    pass  # each call is a round trip; the supervision event arrives within moments
check("__supervise__ for a killed child proc", get(killer.seen_failures.call_one()))
check("owner calls its killed child", get(killer.call_child.call_one()))

# __supervise__ returning False: the owner fails; the client's hook hears of the owner.
careless = spawn_fresh("careless", Parent, "ignore")
careless.start.call_one().get()
careless.fail_child.call_one().get()
check("hook for an unhandled child failure", hooked(1))
check("calls to the failed owner", get(careless.seen_failures.call_one()))

# __supervise__ raising: the owner fails with that exception.
raiser = spawn_fresh("raiser", Parent, "raise")
raiser.start.call_one().get()
raiser.fail_child.call_one().get()
check("hook for a raising __supervise__, first lines", "\n".join(hooked(1)[0].split("\n")[:4]))
check("calls to the owner whose __supervise__ raised, first lines",
      "\n".join(get(raiser.seen_failures.call_one()).split("\n")[:3]))

# __init__ raising fails every rank; calls fail.
bad_mesh = spawn_fresh("badinit", BadInit, gpus=2)
check("hook for __init__ failures", hooked(2))
# Which rank's report a call shows depends on which failure arrived first: keep the rest.
init_err = get(bad_mesh.slice(gpus=1).ping.call_one())
check("call to an actor whose __init__ failed",
      (init_err.split(", The actor")[0], init_err.split("descendants have failed:")[-1]))

# A proc that exits inside an endpoint.
exiter = spawn_fresh("exiter", Exiter)
exiter.ping.call_one().get()
err = get(exiter.exit_proc.call_one())
check("pending call when the proc exits",
      (err.split(",")[0], err.endswith("the process this actor was running on exited with "
                                       "non-zero code 3")))
check("hook for the exited proc", hooked(1))
check("later call to the exited proc", get(exiter.ping.call_one()).split("\n")[-1])

# abort() with and without a reason.
aborter = spawn_fresh("aborter", Aborter)
aborter.ping.call_one().get()
aborter.abort_with.broadcast("my reason")
check("hook for abort with a reason", hooked(1))
check("call after abort", get(aborter.ping.call_one()))
silent = spawn_fresh("silent", Aborter)
silent.ping.call_one().get()
silent.abort_with.broadcast(None)
check("hook for abort without a reason", hooked(1))

# stop(): __cleanup__ runs, later calls fail, the hook hears nothing; stopping procs.
port, receiver = Channel.open()
cleaner_procs = this_host().spawn_procs(per_host={"gpus": 1})  # stopped below
cleaner = cleaner_procs.spawn("cleaner", Cleaner, port)
cleaner.ping.call_one().get()
check("stop of an actor mesh", get(cleaner.stop()))
check("__cleanup__ on stop", get(receiver.recv()))
check("call after stop fails", get(cleaner.ping.call_one()).split(",")[0])
check("stop of the proc mesh", get(cleaner_procs.stop()))
check("spawn on stopped procs", outcome(cleaner_procs.spawn, "again", Child))

# A failed actor's __cleanup__ runs too, with an Exception saying why (its actor id masked).
failed_port, failed_receiver = Channel.open()
failing_cleaner = spawn_fresh("failing_cleaner", FailingCleaner, failed_port)
failing_cleaner.ping.call_one().get()
failing_cleaner.die.broadcast()
cleanup_text = brief(failed_receiver.recv().get(timeout=WAIT))
check("__cleanup__ after a failure", re.sub(r"serving \S+: ", "serving <actor>: ", cleanup_text))
hooked(1)
check("stop after the failure", get(failing_cleaner.stop()))

# Ports held by a failing actor: torchmonarch leaves these waits hanging (see the docstring).
holders = spawn_fresh("holders", Holder)
holders.ping.call_one().get()
channel_port, channel_receiver = Channel.open()
holders.fail_holding.broadcast(channel_port)


def channel_receiver_resolves() -> str:
    return get(channel_receiver.recv()).split(",")[0].split("\n")[0]


ours_only("channel receiver of a port the failed actor held", channel_receiver_resolves,
          "SupervisionError: The actor <root>.<__main__.Holder holders{'gpus': 0/1}> and all its "
          "descendants have failed:",
          "the receiver's recv() hangs forever")
hooked(1)

relayer = spawn_fresh("relayer", Holder)
keeper = spawn_fresh("keeper", Holder)
relayer.ping.call_one().get()
keeper.ping.call_one().get()


def relayed_call_resolves() -> str:
    pending = relayer.relay.call_one(keeper)
    relayer.ping.call_one().get()  # handled after relay: the keeper now holds the port
    keeper.fail_holding.broadcast(None)
    outcome_text = get(pending).split("\n")[0]
    hooked(1)
    return outcome_text


ours_only("explicit port passed to another actor that fails", relayed_call_resolves,
          "SupervisionError: Endpoint call relayer.relay() failed, The actor "
          "<root>.<__main__.Holder keeper{'gpus': 0/1}> and all its descendants have failed:",
          "the call waits forever on the relaying actor, which stays healthy")

check("no other fault reached the hook", no_other_faults())
stop_fresh_procs()
check("done", "yes")
