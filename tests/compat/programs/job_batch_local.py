"""Monarch's jobs page, batch mode with a LocalJob: ``job.apply(client_script)``.

Follows "Jobs" (batch mode): applying a job with a client script caches the job as a batch job
in ``.monarch/job_state.pkl`` and starts the script detached with ``MONARCH_BATCH_JOB=1``; the
script's own ``job.state()`` gets the cached job's meshes (whatever spec it passes) and can spawn
actors on them; ``LocalJob.process`` is the client's process.
"""

import os
import tempfile

from compat import check, raises

from monarch.job import LocalJob, job_load

CLIENT = """\
import os
from monarch.actor import Actor, endpoint
from monarch.job import LocalJob

class Hello(Actor):
    @endpoint
    def hello(self):
        return "hello from " + os.environ.get("MONARCH_BATCH_JOB", "unset")

state = LocalJob(hosts=("other",)).state()
procs = state.workers.spawn_procs(per_host={"gpus": 2})
said = sorted(v for _, v in procs.spawn("hello", Hello).hello.call().get().items())
procs.stop().get()
with open("client_result.txt", "w") as f:
    f.write(repr((os.environ["MONARCH_BATCH_JOB"], said)))
"""

os.chdir(tempfile.mkdtemp())
with open("client.py", "w") as f:
    f.write(CLIENT)

job = LocalJob(hosts=("workers",))
raises("process before apply", lambda: job.process)
job.apply("client.py")
check("active after apply", job.active)
check("batch job cached", os.path.exists(".monarch/job_state.pkl"))
check("cached type", type(job_load()).__name__)
check("client exit status", job.process.wait(timeout=120))
with open("client_result.txt") as f:
    check("what the client saw", f.read())
