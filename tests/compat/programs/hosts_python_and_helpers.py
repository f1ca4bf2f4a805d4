"""Monarch's host-mesh API reference and actor helpers of 0.7.0: the names a program uses
around hosts and endpoints beyond the getting-started flow.

Follows the API reference of ``HostMesh.with_python_executable`` (procs run the given
interpreter; ``sys.executable`` in an actor shows it), ``HostMesh.sync_workspace`` (refused on a
sliced host mesh), ``monarch.actor.returns_future`` (an ``async def`` observed with ``get()`` or
``await``), ``monarch.experimental.thread_timeout.ThreadTimeout`` (bounding synchronous work
inside an endpoint, which runs on a thread where ``signal.alarm`` cannot reach) and the
worker-loop entry points ``run_worker_loop_until_shutdown``/``start_worker_loop_forever``, and
``monarch.job.hosts_from_config`` (two local stand-in hosts when nothing is configured).
"""

import asyncio
import inspect
import os
import sys
import tempfile

from compat import check, outcome, raises

from monarch.actor import (
    Actor,
    Future,
    endpoint,
    returns_future,
    run_worker_loop_until_shutdown,
    start_worker_loop_forever,
    this_host,
)
from monarch.experimental.thread_timeout import ThreadTimeout, ThreadTimeoutError
from monarch.tools.config.workspace import Workspace


class Interpreter(Actor):
    @endpoint
    def executable(self) -> str:
        return sys.executable


class Bounded(Actor):
    @endpoint
    def spin(self, seconds: float) -> str:
        n = 0
        try:
            with ThreadTimeout(seconds):
                while n >= 0:  # runs until the timeout interrupts it
                    n += 1
        except ThreadTimeoutError:
            return "timed out"
        return "finished"

    @endpoint
    def quick(self) -> str:
        with ThreadTimeout(30):
            total = sum(range(100))
        return f"finished {total}"


# A second virtual environment sharing this one's packages: its own pyvenv.cfg and bin/python.
link_dir = tempfile.mkdtemp()
os.symlink(os.path.join(sys.prefix, "lib"), os.path.join(link_dir, "lib"))
with open(os.path.join(sys.prefix, "pyvenv.cfg")) as src, \
        open(os.path.join(link_dir, "pyvenv.cfg"), "w") as dst:
    dst.write(src.read())
os.mkdir(os.path.join(link_dir, "bin"))
link = os.path.join(link_dir, "bin", "python")
os.symlink(sys.executable, link)
hosts = this_host().with_python_executable(link)
check("with_python_executable returns", type(hosts).__name__)
procs = hosts.spawn_procs(per_host={"gpus": 2})
seen = procs.spawn("interp", Interpreter).executable.call().get()
check("procs run the given interpreter", [v == link for _, v in seen.items()])
plain = this_host().spawn_procs()
check("other procs keep the default",
      plain.spawn("interp", Interpreter).executable.call_one().get() == link)

bounded = plain.spawn("bounded", Bounded)
check("ThreadTimeout inside an endpoint", bounded.spin.call_one(0.2).get())
check("work within the bound", bounded.quick.call_one().get())
raises("ThreadTimeout(0)", ThreadTimeout, 0)
check("ThreadTimeoutError is not an Exception", issubclass(ThreadTimeoutError, Exception))


@returns_future
async def add_later(x: int) -> int:
    await asyncio.sleep(0)
    return x + 1


fut = add_later(1)
check("returns_future gives a Future", isinstance(fut, Future))
check("get()", fut.get())
check("get() again", fut.get())


async def awaiting() -> int:
    return await add_later(41)


check("await", asyncio.run(awaiting()))
raises("returns_future on a plain function", returns_future, lambda: 1)


@returns_future
async def failing() -> None:
    raise ValueError("boom")


check("exception through get()", outcome(failing().get))

workspace = Workspace(dirs=[link_dir])
check("sync_workspace on a sliced host mesh", outcome(
    lambda: asyncio.run(this_host().slice().sync_workspace(workspace))))
check("worker-loop entry points", [
    str(inspect.signature(run_worker_loop_until_shutdown).parameters["address"].kind),
    str(inspect.signature(start_worker_loop_forever).parameters["ca"].kind),
])
procs.stop().get()
plain.stop().get()

from monarch.job import hosts_from_config  # noqa: E402  (0.7.0's path for it)

configured = hosts_from_config("compat_hosts")
check("hosts_from_config extent", configured.extent)
on_them = configured.spawn_procs(per_host={"gpus": 1})
check("procs on the configured hosts", on_them.spawn("interp", Interpreter).executable.call().get()
      .item(hosts=1, gpus=0) == sys.executable)
configured.shutdown().get()
