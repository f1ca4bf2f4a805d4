"""Monarch's jobs page, ProcessJob part: multi-host meshes from local worker processes.

Follows "Jobs": ``ProcessJob({"trainers": 2, "dataloaders": 1})`` where each host is a worker
process; ``job.state()`` gives one ``HostMesh`` per name with a ``hosts`` dimension; procs
spawned with ``per_host`` add their dimensions after it; actors on different hosts answer with
their mesh points; ``exec_command`` runs a plain command on a host mesh and resolves to the
largest exit code; ``can_run`` tells whether a running job serves a spec; ``kill()`` ends it.
"""

from compat import check

from monarch.actor import Actor, current_rank, endpoint
from monarch.job import ProcessJob, exec_command


class Where(Actor):
    @endpoint
    def where(self) -> dict:
        return dict(current_rank())


job = ProcessJob({"trainers": 2, "dataloaders": 1})
check("active before state", job.active)
state = job.state(cached_path=None)
check("active after state", job.active)
check("trainers extent", state.trainers.extent)
check("dataloaders extent", state.dataloaders.extent)
check("trainers sizes", state.trainers.sizes)
check("mesh type", type(state.trainers).__name__)

procs = state.trainers.spawn_procs(per_host={"gpus": 2})
check("procs extent", procs.extent)
points = procs.spawn("where", Where).where.call().get()
check("actor points across hosts", sorted(str(v) for _, v in points.items()))
one = state.trainers.slice(hosts=1).spawn_procs()
check("procs of one sliced host", one.extent)
check("actor on the sliced host", one.spawn("where1", Where).where.call_one().get())

failing = exec_command(state.dataloaders, ["bash", "-c", "exit 3"])
check("exec_command returns a Future", type(failing).__name__)
check("exec_command exit code", failing.get())
check("exec_command success on two hosts", exec_command(state.trainers, ["true"]).get())

check("can_run the same spec", job.can_run(ProcessJob({"trainers": 2, "dataloaders": 1})))
check("can_run another spec", job.can_run(ProcessJob({"trainers": 3})))
procs.stop().get()
one.stop().get()
job.kill()
check("active after kill", job.active)
check("can_run after kill", job.can_run(ProcessJob({"trainers": 2, "dataloaders": 1})))
