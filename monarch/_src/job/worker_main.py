"""`python -m monarch._src.job.worker_main ADDRESS`: one worker host of a `ProcessJob`.

Runs `run_worker_loop_forever` on ADDRESS until killed. A module of its own (rather than
`monarch worker`) so that the job's pid file names exactly the process serving ADDRESS.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Serve as a worker host on `argv[0]`; returns only if the worker loop does."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m monarch._src.job.worker_main tcp://HOST:PORT\n")
        return 2
    from monarch._src.hosts.remote import run_worker_loop_forever

    run_worker_loop_forever(ca="trust_all_connections", address=argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
