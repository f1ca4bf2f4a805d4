"""Helpers shared by the subcommands that act on the current context's job."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_context_option", "all_host_meshes", "host_mesh", "job_and_meshes",
           "running_job"]


def add_context_option(parser: argparse.ArgumentParser) -> None:
    """`--context NAME` (default: the current context)."""
    parser.add_argument("--context", default=None, help="context to use (default: current)")


def running_job(args: argparse.Namespace) -> Any:
    """The applied job of the context. As on torchmonarch, when none runs (never applied here,
    or killed since) the context's recorded spec is applied again; without one this raises.
    Its mounts are kept by the job's mount daemon, so they outlive the command."""
    import os

    from monarch._src.job.current import job_path, load_job_spec, recorded_spec
    from monarch._src.job.mounts import use_mount_daemon
    from monarch.job import job_load  # the facade: the wiring is in before the job attaches

    use_mount_daemon()
    path = job_path(args.context)
    if os.path.exists(path):
        job = job_load(path)
        if job.active:
            return job
    spec = recorded_spec(args.context)
    if spec is None:
        raise FileNotFoundError(
            f"No applied job in context {args.context or 'current'!r} ({path}). Run "
            "`monarch apply module.attr` first."
        )
    sys.stderr.write(f"[monarch] no job running in this context: applying {spec} again\n")
    job = load_job_spec(spec)
    job.apply()
    job.dump(path)
    return job


def job_and_meshes(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The running job and its host meshes by name, in the order the job declares them."""
    job = running_job(args)
    state = job.state(cached_path=None)
    return job, {name: getattr(state, name) for name in state.mesh_names}


def host_mesh(args: argparse.Namespace) -> Any:
    """The host mesh named by `--mesh` (default: the job's first mesh) of the running job."""
    _, meshes = job_and_meshes(args)
    name = args.mesh or next(iter(meshes))
    if name not in meshes:
        raise AttributeError(f"{name!r} is not a valid host mesh name. Available names: "
                             f"{', '.join(sorted(meshes))}")
    return meshes[name]


def all_host_meshes(args: argparse.Namespace) -> list[Any]:
    """Every host mesh of the running job, in the order the job declares them."""
    return list(job_and_meshes(args)[1].values())
