"""Monarch's jobs page, LocalJob part: a job spec, its state and the host meshes in it.

Follows "Jobs": ``LocalJob(hosts=(...))`` as the stand-in that runs every mesh on this machine,
``job.state()`` returning a ``JobState`` whose attributes are ``HostMesh``es, spawning procs and
actors on them, the job's ``active``/``apply_id`` lifecycle, caching the applied job in a pickle
(``state(cached_path=...)``, ``job_load``, ``dumps``/``job_loads``) and ``kill()``.
"""

import os
import tempfile

from compat import check, raises

from monarch.actor import Actor, current_rank, endpoint
from monarch.job import DEFAULT_JOB_PATH, LocalJob, job_load, job_loads


class Where(Actor):
    @endpoint
    def where(self) -> dict:
        return dict(current_rank())


job = LocalJob(hosts=("trainers", "dataloaders"))
check("active before state", job.active)
check("apply_id before state", job.apply_id)

state = job.state(cached_path=None)
check("state type", type(state).__name__)
check("mesh type", type(state.trainers).__name__)
check("local mesh extent", state.trainers.extent)
check("local mesh sizes", state.dataloaders.sizes)
check("active after state", job.active)
check("apply_id is a str", type(job.apply_id).__name__)
raises("unknown mesh name", lambda: state.missing)

procs = state.trainers.spawn_procs(per_host={"gpus": 2})
check("procs extent", procs.extent)
got = procs.spawn("where", Where).where.call().get()
check("actor points", sorted(str(v) for _, v in got.items()))
procs.stop().get()

again = job_loads(job.dumps())
check("dumps/job_loads type", type(again).__name__)
check("loaded job is active", again.active)
check("loaded job keeps apply_id", again.apply_id == job.apply_id)

job.kill()
check("active after kill", job.active)
check("default job path", DEFAULT_JOB_PATH)

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "cache", "job.pkl")
    default = LocalJob()
    hosts = default.state(cached_path=path).hosts
    check("default mesh name is hosts", type(hosts).__name__)
    check("state wrote the cache", os.path.exists(path))
    cached = job_load(path)
    check("cached job type", type(cached).__name__)
    check("cached job active", cached.active)
