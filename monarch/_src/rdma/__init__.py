"""RDMA buffers: one-sided bulk transfers between procs (`monarch.rdma` is the public facade;
`rdma.py` lists its names).

The control plane is a small picklable handle (`handle.BufferHandle`) that travels in ordinary
actor messages; the data plane moves bytes without the owner's endpoints running. Modules:

* `memory`   - turning a tensor or memoryview into (address, length, keep-alive), with checks.
* `hostinfo` - host identity (boot id + pid namespace) and process start times.
* `vm`       - same-host one-sided copies with process_vm_readv/writev.
* `tcp`      - the TCP data plane: a listener per owner proc, parallel streams per transfer.
* `shm`      - the same-host fallback when the kernel refuses process_vm_*.
* `ibverbs`  - the probe for pyverbs and a verbs device (cached, with the reason when absent).
* `verbs`    - the ibverbs data plane: memory regions, queue-pair set-up, RDMA READ/WRITE.
* `cuda`     - staging CUDA tensors through pinned host memory.
* `handle`   - `BufferHandle`, what a buffer pickles to; `errors` - `RDMABufferDroppedError`.
* `manager`  - the per-proc registry of buffers (lazily created), valid words, drop.
* `control`  - the RDMA control operations carried by the mailbox, and `ask()` for them.
* `transfer` - choosing a plane per transfer and running it off the caller's thread.
* `buffer`   - `RDMABuffer` and `RDMAAction`.
* `backend`  - `get_rdma_backend`, `is_ibverbs_available`, warning classes.
"""
