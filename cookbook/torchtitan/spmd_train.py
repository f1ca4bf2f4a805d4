"""Train torchtitan's llama3 debug model on a monarch proc mesh through `monarch.spmd`.

    python cookbook/torchtitan/spmd_train.py --mesh 2x1 --steps 10 [torchtitan args...]
    python cookbook/torchtitan/spmd_train.py --mesh 2x2 --steps 10 [torchtitan args...]
    python cookbook/torchtitan/spmd_train.py --mesh 2x2 --remote-mount /tmp/titan-mount ...

`2x1` is one host (`this_host()`) with 2 procs; `2x2` is a `ProcessJob` of 2 local hosts with 2
procs each. An `SPMDActor` on every proc runs `cpu_launch.py` in-process with torchrun's
variables, so torchtitan sees an ordinary 2- or 4-rank gloo job. With `--remote-mount DIR`,
the 2x2 job ships the code and the venv to its hosts through `job.remote_mount` (FUSE, fetched
on demand and cached per host) instead of relying on a shared disk: the procs run the mounted
interpreter and the launcher from the mounted cookbook.

How each rank's loss reaches the controller: a `TitanReporter` actor is spawned on every
training proc before training starts. It registers a listener with that proc's
`step_reports` module, which the launcher's metrics hook feeds once per step; the listener
sends the record to the controller's `LossCollector` actor (`broadcast`, fire and forget), which
prints it as it arrives and keeps it. Records are pushed by the training processes themselves,
so nothing polls files and it works the same whether the hosts share a disk or not; a rank
that dies simply stops sending (its death is a supervision event, see fault_tolerance.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cookbook.torchtitan import step_reports
from monarch.actor import Actor, ProcMesh, endpoint, this_host, this_proc
from monarch.spmd import SPMDActor

LAUNCHER = str(Path(__file__).resolve().with_name("cpu_launch.py"))


class LossCollector(Actor):
    """On the controller: receives every rank's step records, prints and keeps them."""

    def __init__(self, quiet: bool = False) -> None:
        self._records: list[step_reports.Record] = []
        self._quiet = quiet

    @endpoint
    def record(self, record: step_reports.Record) -> None:
        self._keep(record)

    def _keep(self, record: step_reports.Record) -> None:
        if not self._quiet:
            print(step_reports.format_record(record), flush=True)
        self._records.append(record)

    @endpoint
    def records(self) -> list[step_reports.Record]:
        """Every record received so far, in arrival order."""
        return list(self._records)


class TitanReporter(Actor):
    """On each training proc: forwards the launcher's step records to a `LossCollector`."""

    def __init__(self, collector: Any) -> None:
        self._collector = collector
        step_reports.add_listener(self._send)

    def _send(self, record: step_reports.Record) -> None:
        self._collector.record.broadcast(record)

    @endpoint
    def ready(self) -> bool:
        """Answers once the listener is in place (training may start)."""
        return True

    @endpoint
    def detach(self) -> None:
        """Stop forwarding (before another run on the same procs)."""
        step_reports.remove_listener(self._send)


def train(procs: ProcMesh, titan_args: Sequence[str], collector: Any,
          launcher: str = LAUNCHER) -> None:
    """Run `launcher titan_args` (`cpu_launch.py`) on every proc of `procs` (blocking) and
    feed `collector` each rank's step records. A rank that fails raises at the caller."""
    reporters = procs.spawn("titan_reporter", TitanReporter, collector)
    reporters.ready.call().get()
    spmd = procs.spawn("_SPMDActor", SPMDActor)
    first = spmd.slice(**{label: 0 for label in procs.sizes})
    addr, port = first.get_host_port.call_one(None).get()
    try:
        spmd.main.call(addr, port, [launcher, *titan_args]).get()
    except BaseException:
        # A dead rank cannot detach; the training error is the one to raise.
        with contextlib.suppress(Exception):
            reporters.detach.call().get()
        raise
    reporters.detach.call().get()


def make_procs(mesh: str, mount_root: str | None = None) -> tuple[ProcMesh, Any, str]:
    """`2x1`: 2 procs on this host. `2x2`: a 2-host `ProcessJob`, 2 procs on each.

    With `mount_root` (2x2 only), the hosts get this cookbook and the controller's venv through
    `job.remote_mount` (as Monarch's torchtitan example ships its code and venv): the venv at
    `mount_root/venv`, whose interpreter the procs run, and the code at
    `mount_root/cookbook`, from which the launcher is run. Returns the procs, the job to kill
    afterwards (None for this host) and the launcher's path on the hosts."""
    if mesh == "2x1":
        if mount_root is not None:
            raise ValueError("--remote-mount needs --mesh 2x2 (a job to declare mounts on).")
        return this_host().spawn_procs(per_host={"gpus": 2}), None, LAUNCHER
    if mesh == "2x2":
        from monarch.job import ProcessJob

        job = ProcessJob({"hosts": 2})
        launcher = LAUNCHER
        if mount_root is not None:
            cookbook = Path(LAUNCHER).parents[1]
            job.remote_mount(str(cookbook), mntpoint=f"{mount_root}/cookbook", python_exe=None)
            job.remote_mount(sys.prefix, mntpoint=f"{mount_root}/venv", python_exe="bin/python")
            launcher = f"{mount_root}/cookbook/torchtitan/cpu_launch.py"
        state = job.state(cached_path=None)
        procs = state.hosts.spawn_procs(per_host={"gpus": 2})
        return procs, job, launcher
    raise ValueError(f"--mesh must be 2x1 or 2x2, not {mesh!r}")


def main(argv: Sequence[str] | None = None) -> list[step_reports.Record]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mesh", default="2x1", choices=["2x1", "2x2"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--assets", help="assets directory (default: $MONARCH_TITAN_ASSETS "
                        "or ~/.cache/monarch/torchtitan-assets)")
    parser.add_argument("--remote-mount", metavar="DIR", dest="mount_root",
                        help="2x2: ship this cookbook and the venv to the hosts with "
                        "job.remote_mount, mounted under DIR (e.g. /tmp/titan-mount)")
    args, titan_args = parser.parse_known_args(argv)
    if args.assets:
        # Procs inherit the controller's environment; the launcher reads it there.
        os.environ["MONARCH_TITAN_ASSETS"] = args.assets
    procs, job, launcher = make_procs(args.mesh, args.mount_root)
    collector = this_proc().spawn("loss_collector", LossCollector)
    try:
        train(procs, ["--training.steps", str(args.steps), *titan_args], collector, launcher)
        records = collector.records.call_one().get()
    finally:
        procs.stop().get()
        if job is not None:
            job.kill()
    print(summary(records))
    return records


def summary(records: Sequence[step_reports.Record]) -> str:
    """Per rank: median step time after the first step (which includes start-up) and peak RSS."""
    lines = [f"{len(records)} step records from {len({r['rank'] for r in records})} ranks"]
    for rank in sorted({r["rank"] for r in records}):
        mine = sorted((r for r in records if r["rank"] == rank), key=lambda r: r["step"])
        times = sorted(r["step_s"] for r in mine[1:]) or [mine[0]["step_s"]]
        lines.append(
            f"rank {rank}: median {statistics.median(times):.2f} s/step over steps "
            f"{mine[1]['step'] if len(mine) > 1 else mine[0]['step']}-{mine[-1]['step']}, "
            f"peak RSS {max(r['rss_peak_gib'] for r in mine):.2f} GiB, "
            f"loss {mine[0]['loss']:.3f} -> {mine[-1]['loss']:.3f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
