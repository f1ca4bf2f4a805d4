"""Monarch's SPMD page: torchrun's environment on a proc mesh, and torchrun scripts run unchanged.

Follows "SPMD" (``monarch.spmd``): ``setup_torch_elastic_env(procs)`` gives every proc RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_* and one
MASTER_ADDR/MASTER_PORT (the last mesh dimension is the local one), for actors spawned
afterwards; an explicit master address and port; the both-or-neither rule; and
``SPMDActor.main`` running a script as ``__main__`` on every proc with its arguments.
"""

import os
import tempfile

from compat import check, raises

from monarch.actor import Actor, endpoint, this_host
from monarch.spmd import SPMDActor, setup_torch_elastic_env

KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
        "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME"]


class EnvReader(Actor):
    @endpoint
    def env(self) -> dict:
        return {k: os.environ.get(k) for k in [*KEYS, "MASTER_ADDR", "MASTER_PORT"]}


procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
check("setup_torch_elastic_env returns", setup_torch_elastic_env(procs))
envs = procs.spawn("env_reader", EnvReader).env.call().get()
for point, env in sorted(envs.items(), key=lambda item: item[0].rank):
    check(f"torchrun env of rank {point.rank}", {k: env[k] for k in KEYS})
masters = {(env["MASTER_ADDR"], env["MASTER_PORT"]) for _, env in envs.items()}
check("one rendezvous address for all ranks", len(masters))
addr, port = masters.pop()
check("master port is a number", port.isdigit())

pair = this_host().spawn_procs(per_host={"gpus": 2})
setup_torch_elastic_env(pair, master_addr="127.0.0.1", master_port=29511)
got = pair.spawn("env_reader", EnvReader).env.call().get()
check("explicit master", sorted((e["RANK"], e["MASTER_ADDR"], e["MASTER_PORT"])
                                for _, e in got.items()))
raises("master_addr without master_port", setup_torch_elastic_env, pair, master_addr="x")

script_dir = tempfile.mkdtemp()
script = os.path.join(script_dir, "train.py")
with open(script, "w") as f:
    f.write(
        "import os, sys\n"
        "out = os.path.join(os.path.dirname(__file__), 'rank_' + os.environ['RANK'])\n"
        "with open(out, 'w') as f:\n"
        "    f.write(' '.join([__name__, os.environ['RANK'], os.environ['LOCAL_RANK'],\n"
        "                      os.environ['WORLD_SIZE'], os.environ['MASTER_PORT'],\n"
        "                      repr(sys.argv[1:])]))\n"
    )
spmd = pair.spawn("spmd", SPMDActor)
ran = spmd.main.call("127.0.0.1", 29512, [script, "--lr", "0.1"]).get()
check("SPMDActor.main results", [v for _, v in sorted(ran.items(), key=lambda i: i[0].rank)])
outputs = []
for name in sorted(os.listdir(script_dir)):
    if name.startswith("rank_"):
        with open(os.path.join(script_dir, name)) as f:
            outputs.append(f.read())
check("what the script saw on each rank", outputs)
procs.stop().get()
pair.stop().get()
