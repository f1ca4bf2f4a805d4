"""Monarch's tensor engine page: remote functions in their other forms, fetch futures, borrows.

Follows the documentation of ``monarch.remote`` (a lambda sent by value, a string path to a
library function, arity errors), ``call_on_shard_and_fetch``, ``fetch_shard`` futures,
``Stream.borrow(mutable=True)``, ``to_mesh`` with a proc mesh and dtypes on the mesh.
"""

import tensorfns
import torch
from compat import check, raises

import monarch
from monarch.actor import this_host

procs = this_host().spawn_procs(per_host={"gpus": 2})
with procs.activate():
    x = torch.ones(2) + monarch.get_active_mesh().rank("gpus").float()
    fut = monarch.call_on_shard_and_fetch(tensorfns.add_one, x, shard={"gpus": 1})
    check("call_on_shard_and_fetch gives a", type(fut).__name__)
    check("its value", fut.result().tolist())
    fut = monarch.fetch_shard(x)
    check("fetch_shard gives a", type(fut).__name__)
    check("its get()", fut.get().tolist())

    times_five = monarch.remote(lambda t: t * 5, propagate=lambda t: t)
    check("a lambda sent by value", monarch.inspect(times_five(x), gpus=1).tolist())
    ones = monarch.remote("torch.ones", propagate=lambda n: torch.empty(n))
    check("a library function by string path", monarch.inspect(ones(3)).tolist())
    raises("a wrong number of arguments is caught by the propagator",
           lambda: tensorfns.add_one(torch.ones(2), torch.ones(2)))
    raises("call_one over two procs", lambda: tensorfns.world_size.call_one())

    side = monarch.Stream("mutating")
    xb, borrow = side.borrow(x, mutable=True)
    with side.activate():
        xb.add_(1)
    borrow.drop()
    check("a mutable borrow's change is seen after the drop", monarch.inspect(x, gpus=1).tolist())

    check("to_mesh with the proc mesh itself", monarch.inspect(x.to_mesh(procs), gpus=1).tolist())
    check("half precision on the mesh", str(monarch.inspect(torch.ones(2).to(torch.float16)).dtype))
    check("a tensor knows its mesh", x.mesh is not None)
