"""monarch.spmd: run torchrun-style SPMD scripts unchanged on a proc mesh.

`setup_torch_elastic_env(proc_mesh)` gives every proc the torchrun environment (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...); `SPMDActor.main` runs a script as
`__main__` on every proc.
"""

import monarch.actor  # noqa: F401  (the controller's facade and its wiring, as monarch.job)
from monarch._src.spmd.actor import (
    SPMDActor,
    setup_torch_elastic_env,
    setup_torch_elastic_env_async,
)

__all__ = ["SPMDActor", "setup_torch_elastic_env", "setup_torch_elastic_env_async"]
