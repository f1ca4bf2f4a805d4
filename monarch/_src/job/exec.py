"""`exec_command`: run a plain command on the procs of a host mesh (`shell.py` has `shell`).

One `BashActor` per proc starts the command as a child process (a `.py` file runs under the
proc's interpreter), reads its stdout and stderr line by line and sends each line to a port the
caller opened; the caller prints them with a rank prefix while they arrive. The endpoint's reply
(the exit code) is sent after the last line, so once every reply is in, every line is too
(per-sender FIFO). The command never imports monarch: it is an ordinary program whose
environment carries `MONARCH_RANK_<dim>` and `MONARCH_SIZE_<dim>` for each mesh dimension, and
the torchrun variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `GROUP_RANK`,
..., `MASTER_ADDR`/`MASTER_PORT` on the first proc's host) derived as `monarch.spmd` does, with
the procs of one host as a torchrun node (`per_host`'s dimensions are the local ones), so a
torchrun script runs unchanged under `monarch exec`.
Variables passed in `env` win over both.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO

from monarch._src.hosts.addresses import free_port
from monarch._src.job.torchrun import torch_elastic_env
from monarch._src.lowlevel import Future
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import current_rank
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.port import Channel, Port

__all__ = ["BashActor", "exec_command", "rank_env"]

# Bound on stopping the procs that ran a command (and on one line arriving after the reply).
_STOP_TIMEOUT = 30.0


def rank_env(point: Any) -> dict[str, str]:
    """`MONARCH_RANK_<dim>`/`MONARCH_SIZE_<dim>` (plus flat `MONARCH_RANK`, `MONARCH_WORLD_SIZE`).

    Each dimension appears as its label is written (`MONARCH_RANK_gpus`, as torchmonarch sets it)
    and upper-cased (`MONARCH_RANK_GPUS`).
    """
    world = math.prod(point.extent.sizes)
    env = {"MONARCH_RANK": str(point.rank), "MONARCH_WORLD_SIZE": str(world)}
    for label, size in zip(point.extent.labels, point.extent.sizes):
        for name in {label, label.upper()}:
            env[f"MONARCH_RANK_{name}"] = str(point[label])
            env[f"MONARCH_SIZE_{name}"] = str(size)
    return env


def subdir(point: Any) -> str:
    """What `$SUBDIR` in an `output_dir` becomes for a proc: `hosts_1_gpus_0`."""
    return "_".join(f"{label}_{point[label]}" for label in point.extent.labels)


def _argv(cmd: str | Sequence[str]) -> list[str] | str:
    if isinstance(cmd, str):
        return cmd
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("exec_command got an empty command. Pass a string or a non-empty list.")
    if argv[0].endswith(".py"):
        return [sys.executable, *argv]
    return argv


class BashActor(Actor):
    """Runs one command per call as a child process of its proc and streams the output."""

    def __init__(self) -> None:
        # Position in the proc mesh it was spawned on (calls may come through slices, whose
        # cast rank differs).
        self.point = current_rank()

    @endpoint
    def get_host_port(self) -> tuple[str, int]:
        """This host's name and a free TCP port on it (the torchrun rendezvous of a command)."""
        return socket.gethostname(), free_port()

    @endpoint
    def run(
        self,
        cmd: str | list[str],
        env: dict[str, str] | None,
        workdir: str | None,
        out: Port[tuple[int, str, str]],
        master: tuple[str, int, int] | None = None,
        output_dir: str | None = None,
    ) -> int:
        """Run `cmd`, sending `(rank, "stdout"|"stderr", line)` to `out`; returns its exit code.

        With `master` (host, port, procs per host), the command also gets the torchrun
        environment. With `output_dir` (`$SUBDIR` expanded), its output goes to `stdout.txt`
        and `stderr.txt` there, on this host, instead of to `out`."""
        point = self.point
        child_env = dict(os.environ)
        child_env.update(rank_env(point))
        if master is not None:
            child_env.update(torch_elastic_env(point.rank, list(point.extent.sizes), master[2]))
            child_env["MASTER_ADDR"], child_env["MASTER_PORT"] = master[0], str(master[1])
        child_env.update(env or {})
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        argv = _argv(cmd)
        if output_dir is not None:
            where = output_dir.replace("$SUBDIR", subdir(point))
            os.makedirs(where, exist_ok=True)
            with open(os.path.join(where, "stdout.txt"), "wb") as fo, \
                    open(os.path.join(where, "stderr.txt"), "wb") as fe:
                return subprocess.run(argv, shell=isinstance(argv, str), cwd=workdir,
                                      env=child_env, stdin=subprocess.DEVNULL, stdout=fo,
                                      stderr=fe, check=False).returncode
        proc = subprocess.Popen(
            argv,
            shell=isinstance(argv, str),
            cwd=workdir,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def pump(stream: Any, kind: str) -> None:
            for raw in iter(stream.readline, b""):
                out.send((point.rank, kind, raw.decode(errors="replace").rstrip("\n")))

        readers = [
            threading.Thread(target=pump, args=(proc.stdout, "stdout"), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, "stderr"), daemon=True),
        ]
        for r in readers:
            r.start()
        code = proc.wait()
        for r in readers:
            r.join()
        return code


def _select(host_mesh: HostMesh, point: dict[str, int] | None) -> HostMesh:
    if point:
        return host_mesh.slice(**point)
    return host_mesh


def exec_command(
    host_mesh: HostMesh,
    cmd: str | Sequence[str],
    env: dict[str, str] | None = None,
    workdir: str | None = None,
    output_dir: str | None = None,
    rank: int | None = None,
    point: dict[str, int] | None = None,
    per_host: dict[str, int] | None = None,
    *,
    workspace: str | None = None,
    workspace_dest: str | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> Future[int]:
    """Run `cmd` on every proc of `host_mesh` (or one rank/point); returns the largest exit code.

    Procs are spawned (`per_host` per host, default one), each runs `cmd` with its rank in the
    environment, output lines are printed as `[rank] line` while they arrive, then the procs are
    stopped. As in torchmonarch: `rank` picks one host of the flattened host mesh and `point`
    a slice of it (the procs are spawned there); with `output_dir`, each proc writes its output
    to `stdout.txt`/`stderr.txt` in that directory on its host (`$SUBDIR` in it becomes the
    proc's point, e.g. `hosts_1_gpus_0`) and nothing is printed. `workspace` first syncs a local
    directory to the hosts (see `sync_workspace`) and runs there unless `workdir` is given.
    """
    if rank is not None and point is not None:
        raise ValueError("exec_command takes rank or point, not both. Pass one of them.")
    out_stream = stdout if stdout is not None else sys.stdout
    err_stream = stderr if stderr is not None else sys.stderr
    hosts = _select(host_mesh, point)
    result: concurrent.futures.Future[int] = concurrent.futures.Future()

    def work() -> None:
        try:
            result.set_result(
                _run(hosts, cmd, env, workdir, output_dir, rank, per_host, workspace,
                     workspace_dest, out_stream, err_stream)
            )
        except BaseException as exc:  # noqa: BLE001  # handed to the caller through the future
            result.set_exception(exc)

    threading.Thread(target=work, name="monarch-exec", daemon=True).start()
    return Future.from_concurrent(result)


def _run(
    hosts: HostMesh,
    cmd: str | Sequence[str],
    env: dict[str, str] | None,
    workdir: str | None,
    output_dir: str | None,
    rank: int | None,
    per_host: dict[str, int] | None,
    workspace: str | None,
    workspace_dest: str | None,
    out_stream: TextIO,
    err_stream: TextIO,
) -> int:
    if isinstance(cmd, str) and not cmd.strip():
        raise ValueError("exec_command got an empty command. Pass a string or a non-empty list.")
    if rank is not None:
        n = len(hosts)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < n:
            raise IndexError(f"exec_command rank {rank!r} is out of range for {n} hosts; it "
                             "picks one host of the flattened host mesh.")
        if hosts.sizes:
            hosts = hosts.flatten("rank").slice(rank=rank)
    if workspace is not None:
        from monarch._src.job.workspace import sync_workspace

        report = sync_workspace(hosts, workspace, workspace_dest)
        if workdir is None:
            workdir = report.dest
    procs = hosts.spawn_procs(per_host=per_host or {}, name="exec")
    try:
        actors: Any = procs.spawn("_BashActor", BashActor)
        port, receiver = Channel[tuple[int, str, str]].open()

        def printer() -> None:
            while True:
                item = receiver.recv().get()
                if item is None:
                    return
                r, kind, line = item
                stream = out_stream if kind == "stdout" else err_stream
                stream.write(f"[{r}] {line}\n")
                stream.flush()

        printing = threading.Thread(target=printer, name="monarch-exec-print", daemon=True)
        printing.start()
        try:
            first = actors.slice(**{label: 0 for label in actors.sizes}) if actors.sizes \
                else actors
            # The procs of a host are its "node": per_host's dims are the local ones.
            master = (*first.get_host_port.call_one().get(), math.prod((per_host or {}).values()))
            codes = actors.run.call(_argv_checked(cmd), env, workdir, port, master,
                                    output_dir).get()
        finally:
            port.send(None)  # type: ignore[arg-type]  # end marker, after every remote line
            printing.join(timeout=_STOP_TIMEOUT)
        return int(max(code for _, code in codes.items()))
    finally:
        procs.stop().get(timeout=_STOP_TIMEOUT)


def _argv_checked(cmd: str | Sequence[str]) -> str | list[str]:
    return cmd if isinstance(cmd, str) else [str(c) for c in cmd]
