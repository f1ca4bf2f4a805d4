"""The torchrun environment of one rank: what `monarch exec` and `monarch.spmd` both set.

torchrun starts N copies of a script and tells each who it is through environment variables.
A job's procs play those copies: `torch_elastic_env` derives the variables from a flat rank in
a mesh. It lives in the job feature because `exec_command` needs it and the SPMD feature builds
on jobs (spmd imports job, never the other way).
"""

from __future__ import annotations

import math

__all__ = ["torch_elastic_env"]


def torch_elastic_env(rank: int, sizes: list[int],
                      local_world: int | None = None) -> dict[str, str]:
    """The torchrun variables for flat `rank` of a mesh with dimension `sizes` (row-major).

    The procs of one "node" are `local_world` consecutive ranks: by default the last
    dimension (as torchmonarch's SPMDActor counts)."""
    world = math.prod(sizes) if sizes else 1
    if local_world is None:
        local_world = sizes[-1] if sizes else 1
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % local_world),
        "LOCAL_WORLD_SIZE": str(local_world),
        "WORLD_SIZE": str(world),
        "GROUP_RANK": str(rank // local_world),
        "GROUP_WORLD_SIZE": str(math.ceil(world / local_world)),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "rank",
    }
