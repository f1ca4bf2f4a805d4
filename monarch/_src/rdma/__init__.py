"""RDMA buffers: one-sided bulk transfers between procs (`monarch.rdma` is the public facade;
`rdma.py` lists its names).

The control plane is a small picklable handle (`handle.BufferHandle`) that travels in ordinary
actor messages; the data plane moves bytes without the owner's endpoints running. Modules:

* `memory`   - turning a tensor or memoryview into (address, length, keep-alive), with checks;
               `LocalMemoryHandle` and its weak form (the local side of every operation).
* `hostinfo` - host identity (boot id + pid namespace) and process start times.
* `vm`       - same-host one-sided copies with process_vm_readv/writev.
* `tcp`      - the TCP data plane: a listener per owner proc, parallel streams per transfer.
* `shm`      - the same-host fallback when the kernel refuses process_vm_*.
* `ibverbs`  - the probe for pyverbs and a verbs device (cached, with the reason when absent).
* `verbs`    - the ibverbs data plane: memory regions, queue-pair set-up, RDMA READ/WRITE.
* `cuda`     - staging CUDA tensors through pinned host memory.
* `handle`   - `BufferHandle`, what a buffer pickles to; `errors` - `RDMABufferDroppedError`,
               `RdmaInitError`.
* `manager`  - the per-proc registry of buffers (lazily created), valid words, drop.
* `control`  - the RDMA control operations carried by the mailbox, and `ask()` for them.
* `readiness` - starting the managers of a proc mesh (`rdma_init`), `RdmaInitError` checks.
* `transfer` - choosing a plane per transfer and running it off the caller's thread.
* `buffer`   - `RdmaBuffer` (a registration) and `RdmaAction` (a batch of transfers).
* `rdma`     - torchmonarch's Python API path: `RDMABuffer`, `RDMAAction`, the local memory handle
               cache and the per-mesh manager-start cache, over `monarch._rust_bindings.rdma`
               (the binding layer, as on Monarch). A facade by role: the package does not import it.
* `backend`  - `get_rdma_backend`, `is_ibverbs_available`, warning classes.
"""
