"""Jobs for `monarch apply` / `monarch exec` runs of torchtitan (see README.md here).

    monarch apply cookbook/torchtitan/jobs.py:job          # 1 host  (2x1 with --per-host gpus=2)
    monarch apply cookbook/torchtitan/jobs.py:job_2x2      # 2 hosts (2x2 with --per-host gpus=2)

Both are `ProcessJob`s: each host is a local worker process that outlives `monarch apply`, so
a later `monarch exec` reaches it. The number of training procs per host is chosen at exec time
(`--per-host gpus=2`); each proc is one torchrun "local rank".
"""

from monarch.job import ProcessJob

job = ProcessJob({"hosts": 1})
job_2x2 = ProcessJob({"hosts": 2})
