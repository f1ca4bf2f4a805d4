"""`monarch apply [SPEC]`: bring up the job of a spec and record it in the current context."""

from __future__ import annotations

import argparse
import os

from monarch.tools.commands._job import add_context_option

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `apply` subcommand."""
    p = sub.add_parser("apply", help="bring up a job (module.attr or path.py:attr)")
    p.add_argument("module_path", nargs="?", metavar="spec",
                   help="job spec; default: the context's recorded spec")
    p.add_argument("--client-script", default=None, help="run this script as a batch client")
    add_context_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Apply the job (reusing a compatible running one) and cache it for later commands."""
    from monarch._src.job.current import context_dir, job_path, load_job_spec, set_current_job
    from monarch._src.job.job import job_load

    spec = args.module_path
    if spec is None:
        try:
            with open(os.path.join(context_dir(args.context), "spec")) as f:
                spec = f.read().strip()
        except FileNotFoundError:
            raise FileNotFoundError(
                "monarch apply needs a job spec (module.attr or path.py:attr); the context has "
                "none recorded."
            ) from None
    job = load_job_spec(spec)
    set_current_job(spec, args.context)
    path = job_path(args.context)
    if os.path.exists(path):
        cached = job_load(path)
        if cached.active and cached.can_run(job):
            print(f"job already running (apply id {cached.apply_id}); cached at {path}")
            return 0
        if cached.active:
            cached.kill()
        os.remove(path)
    job.apply(args.client_script)
    if args.client_script is None:
        job.dump(path)
    print(f"job applied (apply id {job.apply_id}); cached at {path}")
    return 0
