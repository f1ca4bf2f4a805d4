"""`monarch worker ...`: turn this machine into a monarch host (see `monarch worker --help`)."""

from __future__ import annotations

import argparse

__all__ = ["register", "run", "run_argv"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `worker` subcommand; its arguments belong to the worker's own parser."""
    p = sub.add_parser("worker", help="serve as a worker host", add_help=False)
    p.add_argument("worker_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Hand the remaining arguments to `monarch._src.hosts.worker_cli.main`."""
    return run_argv(list(args.worker_args))


def run_argv(argv: list[str]) -> int:
    """Run `monarch worker` with `argv` (everything after the word `worker`)."""
    try:
        from monarch._src.hosts import worker_cli
    except ImportError as exc:
        raise NotImplementedError(
            f"monarch worker is not available in this installation ({exc})."
        ) from exc
    return int(worker_cli.main(argv))
