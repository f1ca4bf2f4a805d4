"""`python -m monarch._src.job._slurm_batch --port P [--bind-to IP] CLIENT`: a batch allocation.

`SlurmJob.apply(client_script)` submits an sbatch script whose body is this runner; it runs on
the allocation's first node and:

1. starts one worker host per Slurm task with `srun` (task `i` of a node listens on
   `tcp://<node>:<P + i>`, as `worker_bootstrap` writes it), in the background;
2. runs CLIENT, a command line split like a shell would and run without one, with
   `MONARCH_BATCH_JOB=1`, so the client's `job.state()` finds the job cached as a `BatchJob` and
   attaches to this allocation's workers instead of submitting another;
3. ends the workers once the client exits (SIGTERM, then SIGKILL after `WORKER_STOP_TIMEOUT`),
   also when the client failed, and exits with the client's status, which ends the allocation.

The worker command is also what the plain sbatch script (no client) runs under `srun`.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shlex
import subprocess
import sys

__all__ = ["BATCH_ENV", "WORKER_STOP_TIMEOUT", "in_batch_job", "main", "worker_bootstrap"]

# Set on the batch client alone (not on the workers).
BATCH_ENV = "MONARCH_BATCH_JOB"
# Seconds the workers get to exit after SIGTERM before they are killed.
WORKER_STOP_TIMEOUT = 30.0


def in_batch_job() -> bool:
    """True in a batch client started by a job's `apply(client_script)`."""
    return os.environ.get(BATCH_ENV) == "1"


def worker_bootstrap(port: int, bind_to: str | None = None) -> str:
    """The Python source (for `python -c`) of one worker host of a Slurm task: it serves on
    `tcp://<this node>:<port + SLURM_LOCALID>`, or on `bind_to` (an IP address; clients still
    dial the node's name) when given."""
    if bind_to is None:
        host = "{socket.gethostname()}"
    else:
        ip = ipaddress.ip_address(bind_to)
        host = f"[{ip}]" if ip.version == 6 else str(ip)
    return (
        "import os, socket; "
        "from monarch._src.hosts.remote import run_worker_loop_forever; "
        f"port = {int(port)} + int(os.environ.get('SLURM_LOCALID', '0')); "
        f"run_worker_loop_forever(address=f'tcp://{host}:{{port}}', "
        "ca='trust_all_connections')"
    )


def _stop(workers: subprocess.Popen[bytes]) -> None:
    if workers.poll() is not None:
        return
    workers.terminate()  # srun passes the signal on to every worker task
    try:
        workers.wait(timeout=WORKER_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        workers.kill()


def main(argv: list[str] | None = None) -> None:
    """Run the allocation: workers, then the client; exits with the client's status."""
    parser = argparse.ArgumentParser(
        prog="python -m monarch._src.job._slurm_batch",
        description="Run a monarch batch client inside its Slurm allocation.")
    parser.add_argument("--port", type=int, default=22222,
                        help="the first worker port of each node (default %(default)s)")
    parser.add_argument("--bind-to", default=None,
                        help="IP address the workers listen on (default: the node's name)")
    parser.add_argument("client", help="the client's command line, e.g. 'python train.py'")
    args = parser.parse_args(argv)
    client = shlex.split(args.client)
    if not client:
        parser.error("the client command line is empty")
    workers = subprocess.Popen(
        ["srun", "--kill-on-bad-exit=0", sys.executable, "-c",
         worker_bootstrap(args.port, args.bind_to)])
    try:
        try:
            status = subprocess.run(client, env=dict(os.environ, **{BATCH_ENV: "1"}),
                                    check=False).returncode
        except OSError as exc:  # the client's program is missing or not executable
            sys.stderr.write(f"monarch slurm batch: cannot run the client {client[0]!r}: "
                             f"{exc}\n")
            status = 127
    finally:
        _stop(workers)
    sys.exit(status)


if __name__ == "__main__":
    main()
