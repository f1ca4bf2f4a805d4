"""A client program for the CLI tests, run as `python -m tests.debug.app MODE` in a temporary
working directory (its control server publishes `.monarch/controller-<pid>.json` there).

* `debug`: both ranks of `worker` stop at breakpoint(); prints `RESULT <values>` once they
  resumed and exits.
* `serve`: starts the control server, leaves `gate` rank 0 blocked in an endpoint, prints
  `READY`, and on a line on stdin releases it, prints `DONE` and exits.
"""

from __future__ import annotations

import sys

from monarch._src.admin.model import find_proc
from monarch._src.admin.stacks import dump_stacks
from monarch._src.debug import debug_controller
from monarch.actor import this_host
from tests.debug.actors import Gate, Paused


def main(mode: str) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2}, name="trainers")
    worker = procs.spawn("worker", Paused)
    if mode == "debug":
        values = worker.compute.call(20).get(timeout=120)
        print("RESULT", [v for _, v in values.items()], flush=True)
    elif mode == "serve":
        debug_controller()
        for _ in range(3):
            worker.ping.call().get(timeout=30)
        gate = procs.spawn("gate", Gate)
        opener = procs.spawn("opener", Gate)
        blocked = gate.slice(gpus=0).block.call_one()
        # READY once the endpoint runs (its frame is on the actor's stack), bounded.
        for _ in range(600):
            if ", in block" in dump_stacks(find_proc("gate", 0), py_spy=False).python:
                break
        else:
            raise TimeoutError("gate.block never started")
        print("READY", flush=True)
        sys.stdin.readline()
        opener.slice(gpus=0).release.call_one().get(timeout=30)
        print("DONE", blocked.get(timeout=30), flush=True)
    procs.stop().get(timeout=30)


if __name__ == "__main__":
    main(sys.argv[1])
