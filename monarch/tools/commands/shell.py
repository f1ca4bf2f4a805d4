"""`monarch shell`: an interactive shell on one host of the current job."""

from __future__ import annotations

import argparse

from monarch.tools.commands._job import add_context_option, host_mesh

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `shell` subcommand."""
    p = sub.add_parser("shell", help="interactive shell on one host of the job")
    add_context_option(p)
    p.add_argument("--mesh", default=None, help="host mesh name (default: the job's first)")
    p.add_argument("--host", type=int, default=0, help="which host of the mesh (default 0)")
    p.add_argument("--workdir", default=None, help="starting directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read commands from stdin and run them on the chosen host until end of input."""
    from monarch.job import shell

    hosts = host_mesh(args)
    if hosts.sizes:
        label = next(iter(hosts.sizes))
        hosts = hosts.slice(**{label: slice(args.host, args.host + 1)})
    return shell(hosts, workdir=args.workdir)
