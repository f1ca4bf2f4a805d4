"""Monarch's getting-started walk-through, tensor part: distributed tensors passed to actors.

Follows "Getting started" (spawn trainers on a proc mesh, compute ``dist = t @ t.T`` under
``procs.activate()``, call ``trainers.step.call(dist[0])``: each actor receives its own proc's
shard) and the tensor-engine page's "actors and tensors": views, nested arguments, keyword
arguments, the adverbs, ordering against the stream, and errors.
"""

import tensorfns
import torch
from compat import check, ours_only, outcome

import monarch
from monarch.actor import Actor, current_rank, endpoint, this_host


class Trainer(Actor):
    def __init__(self):
        self.seen = []

    @endpoint
    def step(self, t):
        return type(t).__name__, t.tolist(), current_rank().rank

    @endpoint
    def layout(self, t):
        return t.is_contiguous(), t._base is not None

    @endpoint
    def nested(self, a, b, *, key=None):
        def desc(x):
            if isinstance(x, torch.Tensor):
                return ["T", x.tolist()]
            if isinstance(x, dict):
                return {k: desc(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [type(x).__name__, [desc(v) for v in x]]
            return x

        return desc(a), desc(b), desc(key)

    @endpoint
    def scale_in_place(self, t, k):
        t.mul_(k)
        return t.tolist()

    @endpoint
    def record(self, t):
        self.seen.append(t.tolist())

    @endpoint
    def seen_so_far(self):
        return self.seen

    @endpoint
    def boom(self, t):
        raise ValueError("trainer refused the tensor")

    @endpoint
    def ping(self):
        return "pong"


def values(vm):
    return [v for _, v in vm.items()]


procs = this_host().spawn_procs(per_host={"gpus": 2})
early = procs.spawn("early", Trainer)

with procs.activate():
    late = procs.spawn("late", Trainer)
    rank = monarch.get_active_mesh().rank("gpus").float()
    t = torch.rand(3, 4)
    dist = t @ t.T
    rows = [monarch.fetch_shard(dist, gpus=g).result().tolist() for g in range(2)]
    got = values(early.step.call(dist[0]).get())
    check("actors get plain tensors", [g[0] for g in got])
    check("each actor gets its own proc's dist[0]", [g[1] for g in got] == [r[0] for r in rows])
    check("actor ranks", [g[2] for g in got])
    got = values(late.step.call(dist).get())
    check("actors spawned under activate get the full shard", [g[1] for g in got] == rows)

    x = torch.arange(6.0).reshape(2, 3) + rank * 10
    check("row view values", [g[1] for g in values(late.step.call(x[1]).get())])
    check("column view values", [g[1] for g in values(late.step.call(x[:, 1]).get())])
    check("transpose arrives as a non-contiguous view", values(late.layout.call(x.T).get()))
    check("whole tensor arrives as a base tensor", values(late.layout.call(x).get()))
    check(
        "nested lists dicts tuples and kwargs",
        values(late.nested.call([x[0], {"k": x[1]}], (x[0, 0], 5), key={"z": [x[1, 2]]}).get()),
    )
    check("stream adverb", sorted(f.get()[1] for f in late.step.stream(x[0])))

    y = torch.zeros(2)
    y.add_(1)
    early.record.broadcast(y)
    y.add_(5)
    check("broadcast sees operations issued before it only", values(early.seen_so_far.call().get()))
    check("a call sees every earlier operation", [g[1] for g in values(early.step.call(y).get())])

    z = torch.ones(2)
    fut = late.scale_in_place.call(z, 10.0)
    after = z + 1
    check("operations after the call see the endpoint's in-place change",
          monarch.fetch_shard(after).result().tolist())
    check("the call's own result", values(fut.get()))
    check("the controller sees the actor's change", monarch.inspect(z).tolist())

    kind, _, text = outcome(lambda: late.boom.call(x).get()).partition(": ")
    check("an endpoint exception reaches the caller as", kind)
    check("its message is kept", "trainer refused the tensor" in text)
    late.boom.broadcast(x)
    check("a broadcast that raises leaves the actors alive", values(late.ping.call().get()))
    check("the stream goes on", monarch.inspect(x.sum()).item())

    ours_only(
        "call_one on a slice of the actor mesh",
        lambda: late.slice(gpus=1).step.call_one(x[0]).get(timeout=30)[1],
        [10.0, 11.0, 12.0],
        "torchmonarch 0.7.0 hangs: its workers wait for actors the call never reached",
    )
    ours_only(
        "call on a slice of the actor mesh",
        lambda: [g[1] for g in values(late.slice(gpus=0).step.call(x[1]).get(timeout=30))],
        [[3.0, 4.0, 5.0]],
        "torchmonarch 0.7.0 hangs: its workers wait for actors the call never reached",
    )
    ours_only(
        "choose",
        lambda: late.step.choose(x[0]).get(timeout=30)[1] in ([0.0, 1.0, 2.0], [10.0, 11.0, 12.0]),
        True,
        "torchmonarch 0.7.0 hangs: its workers wait for actors the call never reached",
    )
    ours_only(
        "a slice_mesh tensor to the matching actor slice",
        lambda: late.slice(gpus=1).step.call_one(x.slice_mesh(gpus=1)).get(timeout=30)[1],
        [[10.0, 11.0, 12.0], [13.0, 14.0, 15.0]],
        "torchmonarch 0.7.0 fails an internal assertion (the sliced mesh has no reference)",
    )

got = values(early.step.call(x[0]).get())
check("outside activate the shards still arrive", [g[1] for g in got])

other_procs = this_host().spawn_procs(per_host={"gpus": 2})
elsewhere = other_procs.spawn("elsewhere", Trainer)
with procs.activate():
    kind, _, text = outcome(lambda: elsewhere.step.call(x[0])).partition(": ")
    check("tensors of another proc mesh are refused with", kind)
    check("the refusal says why",
          text.startswith("monarch Tensors sent to an actor must be located on the same process "
                          "as the actor."))

# Last: on torchmonarch 0.7.0 the actor that received a failed argument stops answering.
victim = procs.spawn("victim", Trainer)
with procs.activate():
    bad = tensorfns.fail(x)
    kind, _, text = outcome(lambda: victim.step.call(bad).get()).partition(": ")
    check("a failed argument reaches the caller as", kind)
    check("with the original error", "argument computation failed" in text)
