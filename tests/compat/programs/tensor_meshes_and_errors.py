"""Monarch's tensor engine page, the mesh and error side: device meshes and streams as the user
sees them, mesh coordinates, fetching by shard map, what a distributed tensor refuses to do
locally, coalescing and autograd on the mesh.

Follows the tensor-engine documentation: ``get_active_mesh()``, ``mesh.rank(...)``,
``mesh.ranks``, ``fetch_shard(t, shard)``, ``inspect`` of pytrees, ``coalescing()``,
``Stream``, and the errors a user meets first.
"""

import torch
from compat import check, raises

import monarch
from monarch.actor import this_host

raises("get_active_mesh with no mesh active", monarch.get_active_mesh)
check("the default stream outside activate", str(monarch.get_active_stream()))

procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
with procs.activate():
    mesh = monarch.get_active_mesh()
    check("device mesh repr", mesh)
    check("device mesh sizes", dict(mesh.sizes))
    check("a slice of the device mesh", mesh.slice(gpus=1))
    check("a point of the device mesh", mesh.slice(hosts=1, gpus=0))
    stream = monarch.Stream("side")
    check("stream repr", stream)
    check("stream str", str(stream))
    check("the main stream", str(monarch.get_active_stream()))

    x = torch.ones(2, dtype=torch.int64)
    check("distributed tensor repr", x)
    check("a view's repr", torch.ones(2, 3)[0])
    r = mesh.rank(("hosts", "gpus"))
    check("rank over two dimensions",
          [monarch.inspect(r, hosts=h, gpus=g).item() for h in range(2) for g in range(2)])
    check("the ranks property", sorted(mesh.ranks))
    check("fetch_shard with a shard map",
          monarch.fetch_shard(r, {"hosts": 1, "gpus": 0}).result().item())
    raises("a shard map missing a dimension", lambda: monarch.fetch_shard(r, gpus=1))
    raises("a shard map with an unknown dimension", lambda: monarch.inspect(r, foo=1))
    check("inspect of a pytree", monarch.inspect({"a": x, "b": [x * 2], "c": 3}))
    check("inspect of a plain value", monarch.inspect(5))

    raises("shapes are checked at the controller", lambda: torch.ones(2) + torch.ones(3))
    raises("item needs the values", lambda: x.sum().item())
    raises("bool needs the values", lambda: bool(x.sum() > 0))
    raises("tolist is refused", lambda: x.tolist())
    raises("numpy is refused", lambda: x.numpy())
    check("dtype promotion", str((x.float() / 2).dtype))

    with monarch.coalescing():
        y = x + 1
        z = y * 2
    check("coalesced operations", monarch.inspect(z).tolist())

    w = torch.ones(2, requires_grad=True)
    loss = (w * 3).sum()
    loss.backward()
    check("autograd on the mesh", monarch.inspect(w.grad, hosts=1, gpus=1).tolist())

with monarch.no_mesh.activate():
    raises("get_active_mesh under no_mesh", monarch.get_active_mesh)
check("a shard of rank 3 fetched outside activate", monarch.inspect(r, hosts=1, gpus=1).item())
with monarch.no_mesh.activate():
    check("distributed tensors still compute under no_mesh",
          monarch.inspect(r * 2, hosts=1, gpus=0).item())
    check("new tensors under no_mesh are local", type(torch.zeros(1)).__name__)
