"""Monarch's ports and channels: ``Channel.open()``, ``Port``, ``PortReceiver``.

Follows the "Actors" page's sections on ports: a channel opened in the client, a ``Port`` passed to
actors as an argument (100 sends arrive in order), ports used from a thread of an actor,
``Channel.open(once=True)``, ``Channel.open_ranked()`` with ``send(..., port=)``,
``Port.exception`` raising at the receiver, a channel opened inside an actor, and a
``Channel[int]`` subscripted open.
"""

import asyncio
import threading

from compat import check, raises

from monarch.actor import (
    Actor,
    Channel,
    Port,
    PortReceiver,
    current_rank,
    endpoint,
    send,
    this_host,
)


class Sender(Actor):
    @endpoint
    def count_to(self, port: Port, n: int) -> None:
        for i in range(n):
            port.send(i)

    @endpoint
    def from_thread(self, port: Port, value: str) -> None:
        t = threading.Thread(target=port.send, args=(value,))
        t.start()
        t.join()

    @endpoint
    def rank(self) -> int:
        return current_rank()["gpus"]

    @endpoint
    def send_rank(self, port: Port) -> None:
        port.send(current_rank()["gpus"])

    @endpoint
    def own_channel(self, other: "Sender") -> list:
        port, receiver = Channel.open()
        other.count_to.call_one(port, 3).get()
        return [receiver.recv().get() for _ in range(3)]

    @endpoint
    def relay(self, other: "Sender", port: Port) -> None:
        other.forward.call_one(port, "via a relay").get()

    @endpoint
    def forward(self, port: Port, value: str) -> None:
        port.send(value)

    @endpoint
    def give_port(self) -> Port:
        port, self.receiver = Channel.open()
        return port

    @endpoint
    def read(self) -> str:
        return self.receiver.recv().get()

    @endpoint
    def fail_port(self, port: Port) -> None:
        port.exception(ValueError("sent as an exception"))


procs = this_host().spawn_procs(per_host={"gpus": 2})
senders = procs.spawn("senders", Sender)
one = senders.slice(gpus=0)

port, receiver = Channel.open()
one.count_to.broadcast(port, 100)
check("100 sends arrive in order", [receiver.recv().get() for _ in range(100)] == list(range(100)))
senders.send_rank.broadcast(port)
check("each actor sends once", sorted(receiver.recv().get() for _ in range(2)))
one.from_thread.call_one(port, "from a thread").get()
check("send from an actor's thread", receiver.recv().get())
port.send("local")
check("client sends to itself", receiver.recv().get())
check("port repr", port)
check("receiver repr", receiver)
check("port types", (type(port).__name__, type(receiver).__name__))
check("isinstance", (isinstance(port, Port), isinstance(receiver, PortReceiver)))

once_port, once_receiver = Channel.open(once=True)
one.count_to.call_one(once_port, 1).get()
check("once port", once_receiver.recv().get())

typed_port, typed_receiver = Channel[int].open()
typed_port.send(5)
check("Channel[int].open", typed_receiver.recv().get())

ranked_port, ranked_receiver = Channel.open_ranked()
send(senders.rank, (), {}, port=ranked_port)
check("ranked receiver yields (rank, value)",
      sorted(ranked_receiver.recv().get() for _ in range(2)))

error_port, error_receiver = Channel.open()
one.fail_port.call_one(error_port).get()
raises("port.exception raises at recv", error_receiver.recv().get)
check("return_undeliverable default", port.return_undeliverable)

relay_port, relay_receiver = Channel.open()
one.relay.call_one(senders.slice(gpus=1), relay_port).get()
check("port passed through two actors", relay_receiver.recv().get())
actor_port = one.give_port.call_one().get()
actor_port.send("from the client")
check("port returned by an actor", one.read.call_one().get())
check("channel opened in an actor", one.own_channel.call_one(senders.slice(gpus=1)).get())



async def awaited_receives() -> list:
    aport, areceiver = Channel.open()
    one.count_to.broadcast(aport, 3)
    return [await areceiver.recv() for _ in range(3)]


check("await recv in asyncio", asyncio.run(awaited_receives()))
thread_port, thread_receiver = Channel.open()
sender = threading.Thread(target=lambda: [thread_port.send(i) for i in range(5)])
sender.start()
sender.join()
check("client thread sends in order", [thread_receiver.recv().get() for _ in range(5)])
procs.stop().get()
