"""Monarch's tensor engine page: fetching, reductions, mesh slices, streams, remote functions.

Follows the tensor-engine documentation and examples: ``proc_mesh.activate()``,
``monarch.fetch_shard`` and ``monarch.inspect``, ``reduce``/``reduce_`` over mesh dimensions,
``slice_mesh`` and ``to_mesh``, ``Stream`` and borrows, ``remote`` (a decorated module-level
function, a string path, the actor adverbs, failures as ``RemoteException``), endpoint
``rref``, ``no_mesh`` and ``get_active_mesh``.
"""

import tensorfns
import torch
from compat import check, ours_only, outcome, raises

import monarch
from monarch.actor import Actor, endpoint, this_host


class Doubler(Actor):
    @endpoint(propagate=lambda t: torch.empty(t.shape))
    def doubled(self, t):
        return t * 2


procs = this_host().spawn_procs(per_host={"gpus": 2})
doublers = procs.spawn("doublers", Doubler)

with procs.activate():
    mesh = monarch.get_active_mesh()
    check("the active mesh's dimensions", list(mesh.sizes.items()))
    rank = mesh.rank("gpus")
    x = torch.ones(2, 3) + rank.float()
    check("a distributed tensor is a monarch.Tensor", isinstance(x, monarch.Tensor))
    check("its shape and dtype", (tuple(x.shape), str(x.dtype)))
    check("fetch_shard of rank 0", monarch.fetch_shard(x).result().tolist())
    check("fetch_shard of gpus=1", monarch.fetch_shard(x, gpus=1).result().tolist())
    check("inspect of gpus=1", monarch.inspect(x, gpus=1).tolist())
    check("rank tensor values", [monarch.inspect(rank, gpus=g).item() for g in range(2)])


    other = monarch.Stream("other")
    borrowed, borrow = other.borrow(x)
    with other.activate():
        w = borrowed * 10
        check("work on another stream, through a borrow", monarch.inspect(w, gpus=1).tolist())
    borrow.drop()
    check("fetching a tensor of another stream raises",
          outcome(lambda: monarch.inspect(w)).partition(": ")[0])
    check("the active stream's name", monarch.get_active_stream().name)

    check("a decorated module-level remote function",
          monarch.fetch_shard(tensorfns.add_one(x), gpus=1).result().tolist())
    check("a remote function by string path",
          monarch.fetch_shard(tensorfns.times_three(x)).result().tolist())
    vm = tensorfns.world_size.call().get()
    check("remote(fn).call() gives a ValueMesh", type(vm).__name__)
    check("its values", list(vm.values()))
    failed = outcome(lambda: monarch.fetch_shard(tensorfns.explode(x)).result())
    kind, _, text = failed.partition(": ")
    check("a failing remote function fetched raises", kind)
    check("with the original message", "ValueError: exploded on purpose" in text)
    kind, _, text = outcome(lambda: tensorfns.explode.call(x).get()).partition(": ")
    check("a failing remote function called raises", kind)
    check("called, with the original message", "exploded on purpose" in text)

    d = doublers.doubled.rref(x)
    check("rref keeps the result on the procs", isinstance(d, monarch.Tensor))
    check("rref result values", monarch.inspect(d, gpus=1).tolist())

    no_comm = ("torchmonarch 0.7.0's CPU workers have no communicator for collectives: the "
               "worker fails with 'no comm found for stream'")
    sliced = ("torchmonarch 0.7.0 fails an internal assertion fetching from a sliced mesh "
              "('is being sent but does not have a reference')")
    ours_only("reduce sum over gpus",
              lambda: monarch.inspect(x.reduce("gpus", "sum"), gpus=1).tolist(),
              [[3.0] * 3] * 2, no_comm)
    ours_only("reduce max", lambda: monarch.inspect(x.reduce("gpus", "max")).tolist(),
              [[2.0] * 3] * 2, no_comm)
    ours_only("reduce stack",
              lambda: monarch.inspect(x[0].reduce("gpus", "stack")).tolist(),
              [[1.0] * 3, [2.0] * 3], no_comm)
    ours_only("reduce sum with scatter, per rank",
              lambda: [monarch.inspect(torch.arange(4.0).reduce("gpus", "sum", scatter=True),
                                       gpus=g).tolist() for g in range(2)],
              [[0.0, 2.0], [4.0, 6.0]], no_comm)

    def avg_in_place():
        y = x.clone()
        y.reduce_("gpus", "avg")
        return monarch.inspect(y, gpus=0).tolist()

    ours_only("reduce_ avg in place", avg_in_place, [[1.5] * 3] * 2, no_comm)
    ours_only("monarch.reduce function form",
              lambda: monarch.inspect(monarch.reduce(x, "gpus")).tolist(), [[3.0] * 3] * 2,
              no_comm)
    ours_only("slice_mesh keeps the shard of that proc",
              lambda: monarch.inspect(x.slice_mesh(gpus=1)).tolist(), [[2.0] * 3] * 2, sliced)
    ours_only("to_mesh moves a shard to another slice",
              lambda: monarch.inspect(
                  x.slice_mesh(gpus=0).to_mesh(mesh.slice(gpus=1))).tolist(),
              [[1.0] * 3] * 2, sliced)

    with monarch.no_mesh.activate():
        local = torch.ones(2) * 3
        check("torch runs locally under no_mesh", (type(local).__name__, local.tolist()))

raises("remote adverbs need an active mesh", lambda: tensorfns.world_size.call())
raises("monarch.compile does not exist", lambda: monarch.compile)
check("torch runs locally outside activate", type(torch.ones(1) + 1).__name__)
