"""The tensor engine: one controller computing with tensors that live, one shard per proc,
across a mesh.

Layers, from the user down:

* `tensor.py` / `dispatch.py`: `monarch.Tensor`, a torch subclass carrying fake-tensor metadata,
  and the dispatch that turns each torch op under `mesh.activate()` into a command.
* `engine.py`: the per-proc-mesh `Engine` (ids, the ordered command buffer, flushing, fetches)
  and `DeviceMesh` (`mesh.py`), the mesh view users activate.
* `commands.py`: the controller -> worker protocol, a serialisable stream of plain commands.
* `worker.py` / `groups.py`: the `TensorWorker` actor on each proc that executes commands in
  order, holds values by id, and runs collectives over `torch.distributed` process groups.
* `collectives.py`, `movement.py`, `remote.py`, `fetch.py`, `stream.py`, `opaque.py`: the user
  operations on top.
"""
