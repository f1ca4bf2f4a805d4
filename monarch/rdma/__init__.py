"""RDMA buffers: register memory in one actor, move its bytes one-sided from any other.

`RDMABuffer(tensor_or_memoryview)` registers memory without copying; the buffer pickles to a
small handle for messages (the control plane), and holders call `read_into` / `write_from` to
move the bytes directly (the data plane) without the owner's endpoints running. `RDMAAction`
batches many transfers. The data plane is chosen per transfer: a same-host kernel copy, ibverbs,
or a TCP stream; see docs/rdma.md. Importing this module does not import torch.
"""

# The names are listed once, in torchmonarch's private path: the facade imports _src, never the
# reverse.
from monarch._src.rdma.rdma import *  # noqa: F403 - the names are its __all__, imported below
from monarch._src.rdma.rdma import __all__ as __all__
