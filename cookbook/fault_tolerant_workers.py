"""A fault-tolerant pool: a supervisor actor owns its workers and replaces the ones that die.

Run: `.venv/bin/python cookbook/fault_tolerant_workers.py`. The supervisor spawns workers on procs
of its own; when a worker's process is killed, the supervisor's `__supervise__` hears of it,
handles it (returns True, so nothing reaches the client), and respawns that worker on fresh
procs. The client only ever talks to the supervisor.
"""

import os
import signal

from monarch.actor import Actor, MeshFailure, endpoint, this_host


class Worker(Actor):
    @endpoint
    def square(self, x: int) -> int:
        return x * x

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class Supervisor(Actor):
    def __init__(self, n: int) -> None:
        self.workers = [self._start(i) for i in range(n)]
        self.replaced = 0

    def _start(self, i: int):
        procs = this_host().spawn_procs(per_host={"workers": 1}, name=f"worker{i}")
        return procs.spawn(f"worker{i}", Worker)

    def __supervise__(self, failure: MeshFailure) -> bool:
        # `mesh_name` says which worker died; replace it and call the failure handled.
        for i in range(len(self.workers)):
            if failure.mesh_name == f"worker{i}":
                self.workers[i] = self._start(i)
                self.replaced += 1
                return True
        return False  # not one of ours: let our owner decide

    @endpoint
    def squares(self, xs: list[int]) -> list[int]:
        futures = [self.workers[x % len(self.workers)].square.call_one(x) for x in xs]
        return [f.get() for f in futures]

    @endpoint
    def worker_pids(self) -> list[int]:
        return [w.pid.call_one().get() for w in self.workers]

    @endpoint
    def replacements(self) -> int:
        return self.replaced


def main() -> None:
    host = this_host().spawn_procs(name="supervisor")
    supervisor = host.spawn("supervisor", Supervisor, 3)
    print("squares:", supervisor.squares.call_one(list(range(6))).get())
    pids = supervisor.worker_pids.call_one().get()
    print("worker pids:", pids)

    os.kill(pids[1], signal.SIGKILL)  # a worker's process dies
    # Calls keep working: once the supervisor replaced worker 1, its answers come from new pids.
    while supervisor.replacements.call_one().get() < 1:
        pass
    print("after the kill, squares:", supervisor.squares.call_one(list(range(6))).get())
    print("worker pids now:", supervisor.worker_pids.call_one().get())
    host.stop().get()


if __name__ == "__main__":
    main()
