"""`monarch worker`: turn this machine into a monarch host.

    monarch worker --address tcp://10.0.0.5:26600      # serve clients of attach_to_workers
    monarch worker --dask-scheduler tcp://10.0.0.1:8786  # join a Dask cluster as a worker

The `monarch` console script calls `main(argv)` lazily; `python -m
monarch._src.hosts.worker_cli ...` does the same.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["build_parser", "main"]


def build_parser(prog: str = "monarch worker") -> argparse.ArgumentParser:
    """The argument parser of `monarch worker`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--address", help="serve clients at this address (tcp://host:port); "
                       "clients call attach_to_workers with it")
    where.add_argument("--dask-scheduler", metavar="ADDRESS",
                       help="join the Dask cluster of this scheduler; clients call "
                       "hosts_from_dask with the scheduler's address")
    parser.add_argument("--host", default=None,
                        help="with --dask-scheduler: the address the Dask worker listens on")
    parser.add_argument("--nthreads", type=int, default=1,
                        help="with --dask-scheduler: threads of the Dask worker (default 1)")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="end this worker when the process that started it exits (Linux)")
    return parser


def _exit_with_parent() -> None:
    """Ask the kernel for SIGTERM when our parent exits (PR_SET_PDEATHSIG), then check that
    the parent did not exit before we asked."""
    import ctypes
    import os
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the worker outlives its parent
        return
    if os.getppid() != parent:
        raise SystemExit(0)


def main(argv: list[str]) -> int:
    """Run `monarch worker` with `argv` (without the program name); returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.exit_with_parent:
        _exit_with_parent()
    if args.address is not None:
        from monarch._src.hosts.remote import parse_worker_address, run_worker_loop_forever

        try:
            parse_worker_address(args.address, what="monarch worker --address", wildcard=True)
        except (TypeError, ValueError) as exc:
            print(f"monarch worker: {exc}", file=sys.stderr)
            return 2
        try:
            run_worker_loop_forever(ca="trust_all_connections", address=args.address)
        except KeyboardInterrupt:
            return 130
        return 0
    from monarch._src.hosts.dask import run_dask_worker

    try:
        return run_dask_worker(args.dask_scheduler, host=args.host, nthreads=args.nthreads)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
