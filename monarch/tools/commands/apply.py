"""`monarch apply [SPEC]`: bring up the job of a spec and record it in the current context."""

from __future__ import annotations

import argparse

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
    """Apply the job (reusing a compatible running one) and cache it for later commands.

    The mounts the spec declares are handed to the job's mount daemon, which keeps them up after
    this command exits (a reused job takes the spec's declarations; other ones replace the
    daemon's)."""
    from monarch._src.job.current import job_path, load_job_spec, recorded_spec, set_current_job
    from monarch._src.job.job import cached_runner
    from monarch._src.job.mounts import start_mounts, use_mount_daemon

    use_mount_daemon()
    spec = args.module_path or recorded_spec(args.context)
    if spec is None:
        raise FileNotFoundError(
            "monarch apply needs a job spec (module.attr or path.py:attr); the context has "
            "none recorded."
        )
    job = load_job_spec(spec)
    set_current_job(spec, args.context)
    path = job_path(args.context)
    running = cached_runner(path, job)
    if running is None:
        job.apply(args.client_script)
        if args.client_script is not None:
            print(f"job applied (apply id {job.apply_id}) with batch client "
                  f"{args.client_script}")
            return 0
        running = job
        said = "job applied"
    else:
        said = "job already running"
    start_mounts(running)
    running.dump(path)
    print(f"{said} (apply id {running.apply_id}); cached at {path}")
    return 0
