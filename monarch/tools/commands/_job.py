"""Helpers shared by the subcommands that act on the current context's job."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_context_option", "all_host_meshes", "host_mesh", "running_job"]


def add_context_option(parser: argparse.ArgumentParser) -> None:
    """`--context NAME` (default: the current context)."""
    parser.add_argument("--context", default=None, help="context to use (default: current)")


def running_job(args: argparse.Namespace) -> Any:
    """The applied job of the context; raises if there is none."""
    import os

    from monarch._src.job.current import job_path
    from monarch.job import job_load  # the facade: the wiring is in before the job attaches

    path = job_path(args.context)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No applied job in context {args.context or 'current'!r} ({path}). Run "
            "`monarch apply module.attr` first."
        )
    job = job_load(path)
    if not job.active:
        raise RuntimeError(f"The job in {path} is not running. Run `monarch apply` again.")
    return job


def host_mesh(args: argparse.Namespace) -> Any:
    """The host mesh named by `--mesh` (default: the job's first mesh) of the running job."""
    job = running_job(args)
    state = job.state(cached_path=None)
    name = args.mesh or state.mesh_names[0]
    return getattr(state, name)


def all_host_meshes(args: argparse.Namespace) -> list[Any]:
    """Every host mesh of the running job, in the order the job declares them."""
    state = running_job(args).state(cached_path=None)
    return [getattr(state, name) for name in state.mesh_names]
