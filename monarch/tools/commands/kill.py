"""`monarch kill`: stop the current context's job and forget it."""

from __future__ import annotations

import argparse
import os

from monarch.tools.commands._job import add_context_option

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `kill` subcommand."""
    p = sub.add_parser("kill", help="stop the running job of the context")
    add_context_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Kill the job recorded in the context and remove its cache file."""
    from monarch._src.job.current import job_path
    from monarch._src.job.job import discard_state, job_load

    path = job_path(args.context)
    if not os.path.exists(path):
        print(f"no job to kill ({path} does not exist)")
        return 0
    job = job_load(path)
    discard_state(path, job)
    print(f"job {job.apply_id} killed")
    return 0
