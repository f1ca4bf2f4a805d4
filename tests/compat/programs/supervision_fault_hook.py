"""Supervision, part three: the client's `unhandled_fault_hook`, and more ways for an actor to die.

Follows Monarch's supervision documentation on the fault hook: a failure no owner handles reaches
`monarch.actor.unhandled_fault_hook(failure)`; returning drops it, raising (the default calls
`sys.exit(1)`) is fatal: the report goes to stderr and the main thread gets a
`KeyboardInterrupt`, so the program unwinds and its atexit handlers run. Those programs end, so
each runs as a child script here and the checks read its exit status and output (hostname, pid
and time in the stderr header are masked). Then: a proc killed by a signal inside an endpoint,
`SystemExit` and `BaseException` in endpoints and `__init__`, a `@concurrent_endpoint` raising a
`BaseException`, an async `__supervise__`, and calls after a proc mesh was stopped.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap

from _supervision import (
    brief,
    get,
    hooked,
    no_other_faults,
    record_faults,
    spawn_fresh,
    stop_fresh_procs,
)
from compat import check

from monarch.actor import Actor, concurrent_endpoint, endpoint, this_host

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD_PRELUDE = """
import atexit, threading, time
import monarch.actor
from monarch.actor import Actor, endpoint, this_host
atexit.register(lambda: print("ATEXIT", flush=True))

class Doomed(Actor):
    @endpoint
    def ping(self):
        return "pong"

    @endpoint
    def boom(self):
        raise ValueError("nobody handles this")

def fail_unhandled_and_wait():
    # A failure that reaches the fault hook, then a minute for the hook's interrupt to arrive.
    mesh = this_host().spawn_procs(per_host={"gpus": 1}).spawn("doomed", Doomed)
    mesh.ping.call().get()
    mesh.boom.broadcast()
    # Short sleeps: torchmonarch interrupts the main thread when it next runs Python code, not
    # inside a blocking call (ours wakes it there too).
    for _ in range(600):
        time.sleep(0.1)
    print("NOT-INTERRUPTED", flush=True)
"""


def run_child(body: str) -> dict:
    """Run a child script; its exit status, stdout lines and the shape of its stderr."""
    script = textwrap.dedent(CHILD_PRELUDE) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], cwd=HERE, capture_output=True,
                          text=True, timeout=120)
    # torchmonarch 0.7.0 also names its log file (with a random execution id): not compared.
    err_lines = [line for line in done.stderr.splitlines()
                 if not line.startswith("Monarch internal logs are being written to")]
    headers = [i for i, line in enumerate(err_lines)
               if line.startswith("Unhandled monarch error on the root actor")]
    return {
        "status": done.returncode,
        "stdout": done.stdout.split(),
        "headers": [re.sub(r"hostname=.*", "hostname=<host>, PID=<pid> at time <time>:",
                           err_lines[i]) for i in headers],
        "reports": sorted(err_lines[i + 1] for i in headers),
        "last stderr line": err_lines[-1] if err_lines else "",
    }


# The default hook: fatal. The main thread is interrupted and the program ends by SIGINT.
check("default hook", run_child("""
    try:
        fail_unhandled_and_wait()
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        raise
"""))
check("exit status is SIGINT", -signal.SIGINT)

# A hook that raises is fatal too; a program that catches the interrupt carries on.
check("raising hook, interrupt caught", run_child("""
    def hook(failure):
        print("HOOK", flush=True)
        raise RuntimeError("the hook gives up")
    monarch.actor.unhandled_fault_hook = hook
    try:
        fail_unhandled_and_wait()
    except KeyboardInterrupt:
        print("CARRIED-ON", flush=True)
"""))

# A hook that returns drops the fault: nothing is written and the program goes on.
check("returning hook", run_child("""
    seen = threading.Event()
    def hook(failure):
        print("HOOK", flush=True)
        seen.set()
    monarch.actor.unhandled_fault_hook = hook
    mesh = this_host().spawn_procs(per_host={"gpus": 1}).spawn("doomed", Doomed)
    mesh.boom.broadcast()
    print("SEEN" if seen.wait(60) else "NOT-SEEN", flush=True)
"""))

# In this process: a recording hook, and more ways to fail.
record_faults(with_report=False)


class Victim(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def kill_own_proc(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    @endpoint
    def system_exit(self) -> None:
        raise SystemExit(4)

    @endpoint
    def keyboard_interrupt(self) -> None:
        raise KeyboardInterrupt()


class BaseInit(Actor):
    def __init__(self) -> None:
        raise SystemExit("no start")

    @endpoint
    def ping(self) -> str:
        return "pong"


class Concurrent(Actor):
    @endpoint
    async def ping(self) -> str:
        return "pong"

    @concurrent_endpoint
    async def base(self) -> None:
        raise SystemExit("inside a concurrent endpoint")


class AsyncChild(Actor):
    @endpoint
    async def die(self) -> None:
        raise SystemExit("async child died")


class AsyncOwner(Actor):
    def __init__(self) -> None:
        self.seen: list = []
        self.child = this_host().spawn_procs(per_host={"gpus": 1}).spawn("async_kid", AsyncChild)

    @endpoint
    async def fail_child(self) -> None:
        self.child.die.broadcast()

    @endpoint
    async def seen_failures(self) -> list:
        return self.seen

    async def __supervise__(self, failure) -> bool:
        self.seen.append(brief(str(failure)))
        return True


killed = spawn_fresh("killed", Victim)
killed.ping.call_one().get()
check("in-flight call when the proc is SIGKILLed", get(killed.kill_own_proc.call_one()))
check("hook for the SIGKILLed proc", hooked(1))

exiting = spawn_fresh("exiting", Victim)
check("SystemExit in an endpoint", get(exiting.system_exit.call_one()))
check("hook for SystemExit", hooked(1))

interrupted = spawn_fresh("interrupted", Victim)
check("KeyboardInterrupt in an endpoint", get(interrupted.keyboard_interrupt.call_one()))
check("hook for KeyboardInterrupt", hooked(1))

base_init = spawn_fresh("base_init", BaseInit)
check("hook for SystemExit in __init__", hooked(1))
check("call after SystemExit in __init__", get(base_init.ping.call_one()))

concurrent = spawn_fresh("concurrent", Concurrent)
concurrent.ping.call_one().get()
concurrent_err = get(concurrent.base.call_one())
check("BaseException in a concurrent endpoint, first line", concurrent_err.split("\n")[0])
check("the concurrent actor lives on", get(concurrent.ping.call_one()))

owner = spawn_fresh("async_owner", AsyncOwner)
owner.fail_child.call_one().get()
while get(owner.seen_failures.call_one()) == "returned []":
    pass  # each call is a round trip; the supervision event arrives within milliseconds
check("async __supervise__ saw", get(owner.seen_failures.call_one()))

stopped_procs = this_host().spawn_procs(per_host={"gpus": 1})
on_stopped = stopped_procs.spawn("on_stopped", Victim)
on_stopped.ping.call_one().get()
stopped_procs.stop().get()
check("call after its proc mesh stopped", get(on_stopped.ping.call_one()).split(",")[0])

check("no other fault reached the hook", no_other_faults())
stop_fresh_procs()
check("done", "yes")
