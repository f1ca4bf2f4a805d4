"""A three-stage pipeline whose stages are connected by ports, not by endpoint calls.

Run: `.venv/bin/python cookbook/pipeline.py`. Three `Stage` actors, one per proc of a
`{"stages": 3}` proc mesh, each open an inbox (`Channel.open()` inside the actor) and hand its
`Port` back. The client gives each stage the port of the next one, the last stage gets a port of
the client's own channel, and the client feeds items into the first stage's port. Each stage
`recv`s, transforms, and `port.send`s downstream; ports deliver in order per sender, so the
results come out in the order the items went in. A `None` item ends the stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monarch.actor import Actor, Channel, Port, endpoint, this_host

ITEMS = list(range(10))


def square(x: int) -> int:
    return x * x


def add_one(x: int) -> int:
    return x + 1


def label(x: int) -> str:
    return f"<{x}>"


class Stage(Actor):
    def __init__(self, transform: Callable[[Any], Any]) -> None:
        self.transform = transform
        self.inbox: Any = None  # this stage's PortReceiver; None until `open_inbox` has run

    @endpoint
    async def open_inbox(self) -> Port[Any]:
        port, self.inbox = Channel.open()
        return port

    @endpoint
    async def run(self, downstream: Port[Any]) -> int:
        """Send transformed items downstream until `None`, pass `None` on; return the count."""
        handled = 0
        while (item := await self.inbox.recv()) is not None:
            downstream.send(self.transform(item))
            handled += 1
        downstream.send(None)
        return handled


def main() -> None:
    procs = this_host().spawn_procs(per_host={"stages": 3}, name="pipeline")
    stages = [
        procs.slice(stages=i).spawn(f"stage{i}", Stage, transform)
        for i, transform in enumerate([square, add_one, label])
    ]
    inboxes = [stage.open_inbox.call_one().get() for stage in stages]
    out_port, results = Channel[str].open()
    downstream = [*inboxes[1:], out_port]
    running = [stage.run.call_one(port) for stage, port in zip(stages, downstream)]

    for item in [*ITEMS, None]:
        inboxes[0].send(item)
    outputs = []
    while (result := results.recv().get()) is not None:
        outputs.append(result)
    print("items:", ITEMS)
    print("results:", outputs)
    print("handled per stage:", [f.get() for f in running])

    procs.stop().get()
    print("stopped")


if __name__ == "__main__":
    main()
