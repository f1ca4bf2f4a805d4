"""Load balancing with `choose`: independent tasks spread over a mesh of four workers.

Run: `.venv/bin/python cookbook/load_balancing.py`. Every task is sent with `choose`, which picks
one actor of the `{"workers": 4}` mesh at random, so the client needs no queue or bookkeeping of
its own. All tasks are in flight at once; each worker handles its share one at a time. At the end
the client asks every worker how many tasks it handled: the split varies from run to run, the
total does not, and neither do the results.
"""

from __future__ import annotations

from monarch.actor import Actor, endpoint, this_host

TASKS = 40


def count_primes(below: int) -> int:
    return sum(all(n % d for d in range(2, int(n**0.5) + 1)) for n in range(2, below))


class Worker(Actor):
    def __init__(self) -> None:
        self.handled = 0  # tasks this worker has run

    @endpoint
    def primes_below(self, n: int) -> int:
        self.handled += 1
        return count_primes(n)

    @endpoint
    def tasks_handled(self) -> int:
        return self.handled


def main() -> None:
    procs = this_host().spawn_procs(per_host={"workers": 4}, name="workers")
    workers = procs.spawn("workers", Worker)
    limits = [1000 + 100 * i for i in range(TASKS)]
    futures = [workers.primes_below.choose(n) for n in limits]  # all in flight at once
    results = [f.get() for f in futures]

    handled = workers.tasks_handled.call().get()
    print("tasks per worker (varies):", list(handled.values()))
    print("tasks handled in all:", sum(handled.values()))
    print("results correct:", results == [count_primes(n) for n in limits])
    print("primes below 1000 and 4900:", results[0], results[-1])

    procs.stop().get()
    print("stopped")


if __name__ == "__main__":
    main()
