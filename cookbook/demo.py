"""The monarch demo: real processes, actors, every adverb, and slicing, on this machine.

Run with `make demo`. No cluster is needed: `this_host()` forks the procs locally.
"""

import os
import time

from monarch.actor import Accumulator, Actor, Channel, endpoint, send, this_host


class Counter(Actor):
    """A counter per proc."""

    def __init__(self, start: int) -> None:
        self.value_ = start

    @endpoint
    def incr(self, by: int = 1) -> None:
        self.value_ += by

    @endpoint
    def value(self) -> int:
        return self.value_

    @endpoint
    def where(self) -> int:
        return os.getpid()


def main() -> None:
    started = time.perf_counter()
    procs = this_host().spawn_procs(per_host={"gpus": 4})
    counters = procs.spawn("counters", Counter, 0)
    pids = counters.where.call().get()
    print(f"4 procs up in {time.perf_counter() - started:.2f}s, pids {sorted(pids.values())}")
    print(f"(this controller is pid {os.getpid()})")

    counters.incr.broadcast()  # fire-and-forget to every actor
    print("after one broadcast incr:", counters.value.call().get())

    first_two = counters.slice(gpus=slice(0, 2))
    first_two.incr.broadcast(10)
    print("values of the first two after incr(10):", list(first_two.value.call().get().values()))

    print("call_one on gpus=3:", counters.slice(gpus=3).value.call_one().get())
    print("choose (any one):", counters.value.choose().get())
    print("stream, in arrival order:", [f.get() for f in counters.value.stream()])
    total = Accumulator(counters.value, 0, lambda acc, v: acc + v).accumulate().get()
    print("Accumulator sum:", total)

    port, receiver = Channel[int].open_ranked()
    send(counters.value, (), {}, port=port)
    print("send to a ranked port:", sorted(receiver.recv().get() for _ in range(4)))

    procs.stop().get()
    print("stopped; every proc exited")


if __name__ == "__main__":
    main()
