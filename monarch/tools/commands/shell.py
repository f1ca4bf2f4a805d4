"""`monarch shell`: an interactive shell on one host of the current job."""

from __future__ import annotations

import argparse

from monarch.tools.commands._job import add_context_option, host_mesh

__all__ = ["register", "run", "shell_on_job"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `shell` subcommand."""
    p = sub.add_parser("shell", help="interactive shell on one host of the job")
    add_context_option(p)
    p.add_argument("--mesh", default=None, help="host mesh name (default: the job's first)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--point", default=None, metavar="DIM=N,DIM=N",
                       help="the host at this coordinate of the mesh, e.g. hosts=1")
    where.add_argument("--host", type=int, default=None,
                       help="the host of this index along the mesh's first dimension "
                       "(default 0)")
    p.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE",
                   help="environment variable of every command (repeatable)")
    p.add_argument("--workdir", default=None, help="starting directory")
    p.add_argument("--kill", action="store_true", help="kill the job when the shell ends")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Open an interactive shell on the chosen host; returns its exit status."""
    from monarch.tools import cli  # looked up when called: torchmonarch's tests patch it there

    point = args.point
    if point is None and args.host is not None:
        point = str(args.host)
    named = {} if args.context is None else {"context": args.context}
    return int(cli.shell_on_job(mesh_name=args.mesh, point_str=point, env=args.env,
                                workdir=args.workdir, kill=args.kill, **named))


def shell_on_job(mesh_name: str | None, point_str: str | None, env: list[str],
                 workdir: str | None, kill: bool, context: str | None = None) -> int:
    """The shell on one host of the context's job: the host at `point_str` (`DIM=N,...`, or a
    bare index along the first dimension; default: index 0) of the mesh `mesh_name` (default:
    the job's first), with the `KEY=VALUE` variables of `env`; kills the job at the end when
    `kill`. Returns the shell's exit status."""
    from monarch.job import shell
    from monarch.tools.commands.exec import _dims

    variables: dict[str, str] = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"monarch shell --env takes KEY=VALUE, got {item!r}.")
        variables[key] = value
    args = argparse.Namespace(mesh=mesh_name, context=context)
    try:
        hosts = host_mesh(args)
        if hosts.sizes:
            if point_str is not None and "=" in point_str:
                hosts = hosts.slice(**_dims(point_str, "--point"))
            else:
                index = int(point_str) if point_str is not None else 0
                label = next(iter(hosts.sizes))
                hosts = hosts.slice(**{label: slice(index, index + 1)})
        return shell(hosts, env=variables or None, workdir=workdir)
    finally:
        if kill:  # as `monarch kill` would: stop the job and forget it
            from monarch.tools.commands import kill as kill_command

            kill_command.run(args)
