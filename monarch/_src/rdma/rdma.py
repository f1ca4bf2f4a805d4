"""torchmonarch's `monarch._src.rdma.rdma` import path (the one `RDMABuffer`'s repr names).

The same names and objects as the `monarch.rdma` facade, taken from it so the two lists cannot
drift apart.
"""

from monarch.rdma import *  # noqa: F403  (the facade's names, listed once there)
from monarch.rdma import __all__ as __all__
