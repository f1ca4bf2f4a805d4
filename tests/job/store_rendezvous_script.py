"""Run by torchrun (2 ranks, gloo on loopback) from test_host_mesh_from_store.py.

Every rank calls host_mesh_from_store with torchrun's own c10d store; rank 0 spawns an actor on
every host of the returned mesh and prints what each proc reports as one JSON line. The last
barrier keeps rank 1 (whose worker is host 1 when HOSTS=2) alive until rank 0 is done.
"""

import json
import os
import sys

import torch.distributed as dist

from monarch._src.spmd.host_mesh import host_mesh_from_store
from monarch.actor import Actor, endpoint


class Where(Actor):
    @endpoint
    def where(self) -> dict[str, object]:
        return {"pid": os.getpid(), "ppid": os.getppid(),
                "rank_env": os.environ.get("RANK")}


def main() -> None:
    dist.init_process_group("gloo")
    store = dist.distributed_c10d._get_default_store()
    hosts = int(sys.argv[1])
    # HOSTS=2 on one machine: each rank is a host of its own (LOCAL_WORLD_SIZE 1).
    kwargs = {"local_rank": 0, "local_world_size": 1} if hosts == 2 else {}
    mesh = host_mesh_from_store(store, name="trainers", **kwargs)
    rank = dist.get_rank()
    if rank == 0:
        assert mesh is not None
        procs = mesh.spawn_procs(per_host={"gpus": 2})
        got = procs.spawn("where", Where).where.call().get(timeout=60)
        print("RESULT " + json.dumps({
            "extent": dict(zip(mesh.extent.labels, mesh.extent.sizes)),
            "procs": [{"point": dict(p), **v} for p, v in got.items()],
            "rank_pid": os.getpid(),
        }), flush=True)
        procs.stop().get(timeout=60)
    else:
        assert mesh is None
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
