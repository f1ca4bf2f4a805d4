"""Ping-pong: two actor meshes on two proc meshes hit a ball back and forth.

Run: `.venv/bin/python cookbook/ping_pong.py`. Each side is a `{"tables": 2}` proc mesh with one
`Player` per proc; table i of "ping" plays table i of "pong". After the client hands each mesh a
reference to the other one (a mesh passed as an endpoint argument), every player keeps only its
partner, the slice of the other mesh at its own coordinates. A serve is a chain of `call_one`s
made from inside the actors: each hit calls the partner's `hit` and waits for the rest of the
rally. The waiting hit must not block its actor, or the ball could never come back to it: `hit`
is a `@concurrent_endpoint`, so each player handles the returning ball while it still waits.
"""

from __future__ import annotations

from typing import Any

from monarch.actor import Actor, concurrent_endpoint, context, endpoint, this_host

HITS = 10  # hits per rally, both sides together


class Player(Actor):
    def __init__(self, side: str) -> None:
        self.side = side
        self.partner: Any = None  # a one-actor slice of the other mesh; None until `meet` has run
        self.hits = 0  # hits this player made

    @endpoint
    async def meet(self, other: Any) -> None:
        # Both meshes have the same dimension names, so our spawn coordinates pick our partner.
        self.partner = other.slice(**context().actor_instance.rank)

    @concurrent_endpoint
    async def hit(self, count: int) -> list[str]:
        """Hit the ball (the `count`-th hit) and return who hit it from here to the rally's end."""
        self.hits += 1
        if count == HITS:
            return [self.side]
        return [self.side, *await self.partner.hit.call_one(count + 1)]

    @endpoint
    async def hits_made(self) -> int:
        return self.hits


def main() -> None:
    ping_procs = this_host().spawn_procs(per_host={"tables": 2}, name="ping")
    pong_procs = this_host().spawn_procs(per_host={"tables": 2}, name="pong")
    ping = ping_procs.spawn("ping", Player, "ping")
    pong = pong_procs.spawn("pong", Player, "pong")
    # Each mesh must have run __init__ before the other side's actors may message it: the client
    # waits for both introductions, which come after __init__ on each side.
    ping.meet.call(pong).get()
    pong.meet.call(ping).get()

    rallies = ping.hit.call(1).get()  # both tables serve at once
    for point, rally in rallies.items():
        print(f"table {point['tables']} rally: {' '.join(rally)}")
    print("ping hits:", list(ping.hits_made.call().get().values()))
    print("pong hits:", list(pong.hits_made.call().get().values()))

    ping_procs.stop().get()
    pong_procs.stop().get()
    print("stopped")


if __name__ == "__main__":
    main()
