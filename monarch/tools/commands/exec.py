"""`monarch exec [options] -- CMD ...`: run a plain program on every proc of a job's hosts.

The program needs no `import monarch`; each proc gets its `MONARCH_RANK_<dim>` variables and
torchrun's (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, ...); its output comes back line
by line with a `[rank]` prefix; the exit status is the largest of the procs'. torchmonarch's
spellings work too: `-e KEY=VALUE`, `--per-host gpus=4`, `--point hosts=1`, `-m MODULE`,
`--script FILE` (`-` for stdin), `--all` and `--kill` (kill the job afterwards); unlike
torchmonarch, the default runs on every proc of the first mesh. As on torchmonarch, `--all` runs
on every mesh with each proc's output sent to files on its host, and prints where ("Output →
..."): under the job's first gather mount when it declares one (`<remote>/exec_outputs/<id>/`,
read here through the mount), else `/tmp/monarch_exec_<id>/<mesh>/<point>/`; `--output-dir`
chooses the directory instead. With no job running, the context's recorded spec is applied
first (after `monarch kill`, say). `--workspace DIR` first
syncs DIR (a project or a virtual environment) to the hosts, sending only files whose content
changed, and runs the program there.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from monarch.tools.commands._job import add_context_option, host_mesh, job_and_meshes

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `exec` subcommand."""
    p = sub.add_parser("exec", help="run a command on every proc of the job's hosts")
    add_context_option(p)
    meshes = p.add_mutually_exclusive_group()
    meshes.add_argument("--mesh", default=None,
                        help="host mesh name (default: the job's first)")
    meshes.add_argument("--all", dest="run_all", action="store_true",
                        help="run on every mesh of the job (one after another); output goes "
                        "to per-proc files whose place is printed")
    p.add_argument("--per-host", default=None,
                   help='procs per host: DIM=N or JSON such as \'{"gpus": 2}\' (default: one)')
    p.add_argument("--point", default=None, metavar="DIM=N,DIM=N",
                   help="run on the hosts at this coordinate of the mesh, e.g. hosts=1")
    p.add_argument("-m", dest="module", default=None, metavar="MODULE",
                   help="run a Python module (like python -m MODULE)")
    p.add_argument("--script", default=None, metavar="FILE",
                   help="run a bash script read from FILE ('-' for stdin)")
    p.add_argument("--kill", action="store_true", help="kill the job after the command")
    p.add_argument("--workspace", default=None, help="local directory to sync to the hosts")
    p.add_argument("--workspace-dest", default=None, help="where the workspace lands remotely")
    p.add_argument("--workdir", default=None, help="working directory of the command")
    p.add_argument("--rank", type=int, default=None,
                   help="run on this host only (its rank in the flattened host mesh)")
    p.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment variable (repeatable)")
    p.add_argument("--output-dir", default=None,
                   help="write each proc's stdout.txt/stderr.txt here on its host instead of "
                   "printing ($SUBDIR becomes the proc's point, e.g. hosts_1_gpus_0)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the command (after --)")
    p.set_defaults(func=run)


def _dims(text: str, what: str) -> dict[str, int]:
    """`gpus=4,hosts=2` (or a JSON object) as a dict of ints; errors name the option."""
    text = text.strip()
    if text.startswith("{"):
        value = json.loads(text)
    else:
        value = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, number = part.partition("=")
            if not sep or not key.strip() or not number.strip().lstrip("-").isdigit():
                raise ValueError(f"monarch exec {what} takes DIM=N[,DIM=N], got {text!r}.")
            value[key.strip()] = int(number)
    if not isinstance(value, dict) or not value:
        raise ValueError(f"monarch exec {what} takes DIM=N[,DIM=N], got {text!r}.")
    return value


def _redirect(job: Any, mesh: str) -> tuple[str, str]:
    """Where `--all` sends a mesh's output on its hosts, and the line that says so."""
    import uuid

    from monarch._src.job.mounts import gather_mount_points

    run_id = uuid.uuid4().hex[:8]
    gathered = gather_mount_points(job)
    if gathered:
        remote, local = gathered[0]
        return (os.path.join(remote, "exec_outputs", run_id),
                f"Output → {local}/<host>/exec_outputs/{run_id}/ (e.g. "
                f"{local}/hosts_0/exec_outputs/{run_id}/stdout.txt)")
    where = f"/tmp/monarch_exec_{run_id}/{mesh}"
    return f"{where}/$SUBDIR", f"Output → {where}/<point>/ on each host (stdout.txt, stderr.txt)"


def run(args: argparse.Namespace) -> int:
    """Run the command and return the largest exit status of the procs."""
    import sys

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.module:
        cmd = [sys.executable, "-m", args.module, *cmd]
    if args.script is not None:
        if args.script == "-":
            text = sys.stdin.read()
        else:
            with open(args.script) as f:
                text = f.read()
        cmd = ["bash", "-c", text, "monarch-exec", *cmd]
    if not cmd:
        raise ValueError("monarch exec needs a command, e.g. `monarch exec -- python train.py`.")
    if args.point is not None and args.rank is not None:
        raise ValueError("monarch exec takes --point or --rank, not both.")
    if args.run_all and args.mesh is not None:
        raise ValueError("monarch exec takes --all or --mesh, not both.")
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"monarch exec --env takes KEY=VALUE, got {item!r}.")
        env[key] = value
    per_host = _dims(args.per_host, "--per-host") if args.per_host else None
    point = _dims(args.point, "--point") if args.point is not None else None

    # first: a missing job is reported before the runtime loads
    if args.run_all:
        job, meshes = job_and_meshes(args)
    else:
        job, meshes = None, {"": host_mesh(args)}
    from monarch.job import exec_command, sync_workspace

    code = 0
    try:
        for name, hosts in meshes.items():
            output_dir = args.output_dir
            if job is not None and output_dir is None:
                output_dir, where = _redirect(job, name)
                print(where, flush=True)
            workdir = args.workdir
            if args.workspace is not None:
                report = sync_workspace(hosts, args.workspace, args.workspace_dest)
                sys.stderr.write(
                    f"[monarch] workspace {args.workspace} -> {report.dest}: sent "
                    f"{report.files_sent} files, removed "
                    f"{sum(len(v) for v in report.removed.values())}\n")
                workdir = workdir or report.dest
            code = max(code, exec_command(
                hosts, cmd, env=env or None, workdir=workdir, output_dir=output_dir,
                rank=args.rank, point=point, per_host=per_host,
            ).get())
        return code
    finally:
        if args.kill:  # as `monarch kill` would: stop the job and forget it
            from monarch.tools.commands import kill as kill_command

            kill_command.run(args)
