"""`python -m monarch._src.job.batch_runner JOB_FILE SCRIPT`: a job's batch client, supervised.

`apply(client_script)` on a job whose hosts must be ended with the client (`ProcessJob`,
`DaskJob`) caches the job as a `BatchJob` in JOB_FILE and starts this runner detached. The
runner runs SCRIPT with this interpreter and `MONARCH_BATCH_JOB=1` (so the script's
`job.state()` reuses the cached job instead of starting another), waits for it, then kills the
job, also when the script failed before reaching `job.state()`, and exits with the script's
status.
"""

from __future__ import annotations

import os
import subprocess
import sys

BATCH_ENV = "MONARCH_BATCH_JOB"


def main(argv: list[str]) -> int:
    """Run the client in `argv[1]` for the job cached at `argv[0]`; returns its exit status."""
    if len(argv) != 2:
        sys.stderr.write("usage: python -m monarch._src.job.batch_runner JOB_FILE SCRIPT\n")
        return 2
    job_file, script = argv
    status = subprocess.run([sys.executable, script], env=dict(os.environ, **{BATCH_ENV: "1"}),
                            check=False).returncode
    from monarch._src.job.job import job_load

    try:
        job = job_load(job_file)
        job.kill()  # a BatchJob: kills the job it wraps (its workers, its Dask host agents)
    except Exception as exc:  # noqa: BLE001 - reported; the client's status is what counts
        sys.stderr.write(f"monarch batch runner: ending the job failed: {exc}\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
