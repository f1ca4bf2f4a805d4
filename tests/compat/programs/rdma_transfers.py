"""Monarch's RDMA page, the transfer patterns: offsets, many owners, async endpoints, owner loss.

Follows the RDMA examples beyond the basics: reading into and writing from a slice of a larger
local tensor (offsets within local memory), buffers created by the client and pulled by actors,
a handle passed on through a second actor, one ``RDMAAction`` reading from and writing to several
owners at once, ``await`` on transfers inside async endpoints, ``drop()`` by the owner, and a
transfer whose owner's processes have stopped.
"""

import torch
from compat import check, outcome

from monarch.actor import Actor, endpoint, this_host
from monarch.rdma import RDMAAction, RDMABuffer


class Shard(Actor):
    def __init__(self, base: float) -> None:
        self.data = torch.full((4,), base, dtype=torch.float32)
        self.buffer = None

    @endpoint
    def share(self) -> RDMABuffer:
        self.buffer = RDMABuffer(self.data.view(torch.uint8))
        return self.buffer

    @endpoint
    def values(self) -> list:
        return self.data.tolist()

    @endpoint
    def drop_own(self) -> None:
        self.buffer.drop().get()


class Puller(Actor):
    @endpoint
    async def pull(self, buffer: RDMABuffer) -> list:
        local = torch.zeros(buffer.size() // 4, dtype=torch.float32)
        await buffer.read_into(local.view(torch.uint8))
        return local.tolist()

    @endpoint
    async def push(self, buffer: RDMABuffer, value: float) -> None:
        await buffer.write_from(torch.full((buffer.size() // 4,), value).view(torch.uint8))

    @endpoint
    async def relay(self, buffer: RDMABuffer, other) -> list:
        # Hand the same handle on to another actor, which reads it.
        return await other.pull.call_one(buffer)


procs = this_host().spawn_procs(per_host={"gpus": 3})
shards = procs.slice(gpus=slice(0, 2)).spawn("shards", Shard, 1.0)
puller = procs.slice(gpus=2).spawn("puller", Puller)
buffers = list(shards.share.call().get().values())
check("buffer sizes", [b.size() for b in buffers])

wide = torch.full((12,), -1.0)
buffers[0].read_into(wide[4:8].view(torch.uint8)).get()
check("read into a slice of a larger tensor", wide.tolist())
buffers[1].write_from(torch.tensor([0.0, 5.0, 6.0, 0.0])[1:3].view(torch.uint8)).get()
check("write from a slice of a larger tensor", shards.slice(gpus=1).values.call_one().get())

check("async endpoint awaits a read", puller.pull.call_one(buffers[0]).get())
puller.push.call_one(buffers[0], 3.0).get()
check("async endpoint awaits a write", shards.slice(gpus=0).values.call_one().get())
relay_target = procs.slice(gpus=1).spawn("second", Puller)
check("handle relayed through another actor", puller.relay.call_one(buffers[1], relay_target).get())

client_data = torch.arange(6, dtype=torch.float32)
client_buffer = RDMABuffer(client_data.view(torch.uint8))
check("client buffer pulled by an actor", puller.pull.call_one(client_buffer).get())
puller.push.call_one(client_buffer, 8.0).get()
check("client buffer pushed by an actor", client_data.tolist())

a, b = torch.zeros(4), torch.zeros(4)
action = RDMAAction().read_remote(a.view(torch.uint8), buffers[0]).read_remote(
    b.view(torch.uint8), buffers[1])
# The write goes to memory no read of the same batch touches: the batch runs concurrently.
action.write_remote(client_buffer, torch.full((6,), 4.0).view(torch.uint8))
check("action over three owners returns", action.submit().get())
check("action read both shards", [a.tolist(), b.tolist()])
check("action wrote the client's memory", client_data.tolist())
b_only = torch.zeros(4)
one_read = RDMAAction().read_remote(b_only.view(torch.uint8), buffers[1])
check("action of one read", one_read.submit().get())
check("empty action", RDMAAction().submit().get())

shards.slice(gpus=1).drop_own.call_one().get()
check("read after the owner dropped fails", outcome(
    lambda: buffers[1].read_into(torch.zeros(16, dtype=torch.uint8)).get(timeout=30)
).split(":")[0] in ("Exception", "RDMABufferDroppedError"))
client_buffer.drop().get()
check("client drop then read fails", outcome(
    lambda: client_buffer.read_into(torch.zeros(24, dtype=torch.uint8)).get(timeout=30)
).split(":")[0] in ("Exception", "RDMABufferDroppedError"))
procs.stop().get()
check("stopped", "yes")
