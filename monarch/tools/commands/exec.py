"""`monarch exec [options] -- CMD ...`: run a plain program on every proc of a job's hosts.

The program needs no `import monarch`; its output comes back line by line with a `[rank]`
prefix; the exit status is the largest of the procs'. `--workspace DIR` first syncs DIR (a
project or a virtual environment) to the hosts, sending only files whose content changed, and
runs the program there.
"""

from __future__ import annotations

import argparse
import json

from monarch.tools.commands._job import add_context_option, host_mesh

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `exec` subcommand."""
    p = sub.add_parser("exec", help="run a command on every proc of the job's hosts")
    add_context_option(p)
    p.add_argument("--mesh", default=None, help="host mesh name (default: the job's first)")
    p.add_argument("--per-host", default=None,
                   help='procs per host as JSON, e.g. \'{"gpus": 2}\' (default: one)')
    p.add_argument("--workspace", default=None, help="local directory to sync to the hosts")
    p.add_argument("--workspace-dest", default=None, help="where the workspace lands remotely")
    p.add_argument("--workdir", default=None, help="working directory of the command")
    p.add_argument("--rank", type=int, default=None,
                   help="run on this host only (its rank in the flattened host mesh)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment variable (repeatable)")
    p.add_argument("--output-dir", default=None,
                   help="write each proc's stdout.txt/stderr.txt here on its host instead of "
                   "printing ($SUBDIR becomes the proc's point, e.g. hosts_1_gpus_0)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the command (after --)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command and return the largest exit status of the procs."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("monarch exec needs a command, e.g. `monarch exec -- python train.py`.")
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"monarch exec --env takes KEY=VALUE, got {item!r}.")
        env[key] = value
    per_host = json.loads(args.per_host) if args.per_host else None
    import sys

    hosts = host_mesh(args)  # first: a missing job is reported before the runtime loads
    from monarch.job import exec_command, sync_workspace

    workdir = args.workdir
    if args.workspace is not None:
        report = sync_workspace(hosts, args.workspace, args.workspace_dest)
        sys.stderr.write(
            f"[monarch] workspace {args.workspace} -> {report.dest}: sent {report.files_sent} "
            f"files, removed {sum(len(v) for v in report.removed.values())}\n")
        workdir = workdir or report.dest
    return exec_command(
        hosts, cmd, env=env or None, workdir=workdir, output_dir=args.output_dir,
        rank=args.rank, per_host=per_host,
    ).get()
