"""torchtitan survives a SIGKILLed rank: the supervisor restarts the mesh from the last checkpoint.

    python cookbook/torchtitan/fault_tolerance.py --steps 6 --kill-at-step 3 --kill-rank 1

Actors, all on the controller's proc:

* `TitanSupervisor` owns the training procs (2 ranks on this host). Its `train` endpoint
  starts a *generation*: fresh procs, a `TitanReporter` per proc, and `SPMDActor.main`
  running `cpu_launch.py` with torchtitan's checkpointing on. When a rank dies, monarch hands the
  failure to the owner, the supervisor's `__supervise__`, which marks the generation failed
  (or the call to the ranks fails first, with the `SupervisionError` naming the dead rank);
  `train` then stops that generation's procs and starts the next one on the same dump folder,
  so torchtitan loads the latest checkpoint and continues to the step target.
  (`train` is a `@concurrent_endpoint`: while it awaits the ranks, the actor keeps taking
  messages, so `__supervise__` runs as soon as the failure arrives.)
* `ChaosCollector` is the usual `LossCollector` plus a chaos monkey: when the record of
  `--kill-at-step` from `--kill-rank` arrives, it SIGKILLs that rank's process (the pid is in
  the record) and notes the time. Recovery time is from that kill to the arrival of the first
  step record from a restarted process.

The loss curve is continuous: the restarted generation repeats the steps after the last
checkpoint from the same model, optimizer and data-loader state, so its losses match the
killed generation's for the same steps.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cookbook.torchtitan import step_reports
from cookbook.torchtitan.spmd_train import LAUNCHER, LossCollector, TitanReporter
from monarch.actor import (
    Actor,
    MeshFailure,
    concurrent_endpoint,
    endpoint,
    this_host,
    this_proc,
)
from monarch.spmd import SPMDActor


class ChaosCollector(LossCollector):
    """A `LossCollector` that SIGKILLs `kill_rank` once it has reported `kill_at_step`, and
    stamps every record with its arrival time (`arrived`, monotonic seconds here)."""

    def __init__(self, kill_rank: int, kill_at_step: int, quiet: bool = False) -> None:
        super().__init__(quiet)
        self._kill = (kill_rank, kill_at_step)
        self._killed: dict[str, Any] | None = None

    @endpoint
    def record(self, record: step_reports.Record) -> None:
        record = {**record, "arrived": time.monotonic()}
        if self._killed is None and (record["rank"], record["step"]) == self._kill:
            os.kill(record["pid"], signal.SIGKILL)
            self._killed = {"pid": record["pid"], "at": time.monotonic(), "step": record["step"]}
            if not self._quiet:
                print(f"chaos: SIGKILL rank {record['rank']} (pid {record['pid']}) after step "
                      f"{record['step']}", flush=True)
        self._keep(record)

    @endpoint
    def killed(self) -> dict[str, Any] | None:
        """`{"pid", "at", "step"}` of the kill, or None before it."""
        return self._killed


class TitanSupervisor(Actor):
    """Owns the training procs; restarts them from the last checkpoint when a rank fails."""

    def __init__(self, collector: Any, titan_args: Sequence[str], per_host: dict[str, int],
                 max_restarts: int = 2) -> None:
        self._collector = collector
        self._args = list(titan_args)
        self._per_host = dict(per_host)
        self._max_restarts = max_restarts
        self._generation = 0
        self._failed: asyncio.Event | None = None
        self._failures: list[str] = []
        self._timeline: list[tuple[str, int, float]] = []  # (event, generation, monotonic s)

    async def __supervise__(self, failure: MeshFailure) -> bool:
        """A mesh of ours failed. Failures of the running generation (its mesh names end in
        `_g<generation>`) stop it, to be restarted by `train`; late reports from an earlier
        generation, already replaced, are only recorded."""
        self._failures.append(str(failure))
        current = failure.mesh_name.endswith(f"_g{self._generation}")
        if current and self._failed is not None and not self._failed.is_set():
            self._timeline.append(("failure seen", self._generation, time.monotonic()))
            self._failed.set()
        return True

    @concurrent_endpoint
    async def train(self) -> dict[str, Any]:
        """Train to the step target, restarting after failures; returns what happened."""
        restarts: list[float] = []
        while True:
            self._generation += 1
            self._failed = asyncio.Event()
            finished = await self._run_generation(self._generation, self._failed)
            if finished:
                return {"generations": self._generation, "failures": list(self._failures),
                        "timeline": list(self._timeline)}
            if len(restarts) >= self._max_restarts:
                raise RuntimeError(f"torchtitan failed {len(restarts) + 1} times; giving up. "
                                   f"Failures: {self._failures}")
            restarts.append(time.monotonic())

    async def _run_generation(self, gen: int, failed: asyncio.Event) -> bool:
        """One set of procs, trained until done (True) or until a rank fails (False)."""
        self._timeline.append(("spawn", gen, time.monotonic()))
        procs = this_host().spawn_procs(per_host=self._per_host, name=f"titan_procs_g{gen}")
        try:
            reporters = procs.spawn(f"titan_reporter_g{gen}", TitanReporter, self._collector)
            await reporters.ready.call()
            spmd = procs.spawn(f"titan_spmd_g{gen}", SPMDActor)
            first = spmd.slice(**{label: 0 for label in procs.sizes})
            addr, port = await first.get_host_port.call_one(None)
            argv = [LAUNCHER, *self._args]
            run = asyncio.ensure_future(_awaited(spmd.main.call(addr, port, argv)))
            failure = asyncio.ensure_future(failed.wait())
            await asyncio.wait({run, failure}, return_when=asyncio.FIRST_COMPLETED)
            if run.done() and run.exception() is None:
                failure.cancel()
                return True
            if not failed.is_set():
                # The call failed (SupervisionError: the rank it waited on died) before the
                # failure report reached `__supervise__`; the report may then never come, as
                # the procs are stopped next. Recorded here instead, once.
                self._failures.append(f"generation {gen}: {run.exception()}")
                self._timeline.append(("call failed", gen, time.monotonic()))
            # A rank died (or raised): this generation is over. The call may still be waiting
            # on survivors stuck in a collective; stopping the procs ends them.
            run.cancel()
            failure.cancel()
            return False
        finally:
            await procs.stop()
            self._timeline.append(("stopped", gen, time.monotonic()))


async def _awaited(future: Any) -> Any:
    return await future


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--kill-at-step", type=int, default=3)
    parser.add_argument("--kill-rank", type=int, default=1)
    parser.add_argument("--checkpoint-interval", type=int, default=2)
    parser.add_argument("--dump-folder", default="./outputs/titan-ft")
    parser.add_argument("--procs", type=int, default=2, help="ranks (procs on this host)")
    args, titan_args = parser.parse_known_args(argv)
    titan = ["--training.steps", str(args.steps), "--dump_folder", args.dump_folder,
             "--checkpoint.enable", "--checkpoint.interval", str(args.checkpoint_interval),
             *titan_args]
    collector = this_proc().spawn("loss_collector", ChaosCollector, args.kill_rank,
                                  args.kill_at_step)
    supervisor = this_proc().spawn("titan_supervisor", TitanSupervisor, collector, titan,
                                   {"gpus": args.procs})
    outcome = supervisor.train.call_one().get()
    records = collector.records.call_one().get()
    killed = collector.killed.call_one().get()
    outcome.update(recovery(records, killed))
    outcome["killed"] = killed
    print(report(records, outcome))
    return {**outcome, "records": records}


def recovery(records: Sequence[step_reports.Record], killed: dict[str, Any] | None
             ) -> dict[str, Any]:
    """Kill time to the first record of a restarted process; the step it resumed at."""
    if killed is None:
        return {"recovery_s": None, "resumed_at_step": None}
    before = {r["pid"] for r in records if r["arrived"] <= killed["at"]}
    after = [r for r in records if r["arrived"] > killed["at"] and r["pid"] not in before]
    if not after:
        return {"recovery_s": None, "resumed_at_step": None}
    first = min(after, key=lambda r: r["arrived"])
    return {"recovery_s": first["arrived"] - killed["at"], "resumed_at_step": first["step"]}


def report(records: Sequence[step_reports.Record], outcome: dict[str, Any]) -> str:
    """The global loss per step, old and restarted generations side by side."""
    by_step: dict[int, list[float]] = {}
    for r in records:
        if r["rank"] == 0:
            by_step.setdefault(r["step"], []).append(r["global_avg_loss"])
    lines = [f"step {s}: loss " + " / ".join(f"{v:.4f}" for v in by_step[s])
             for s in sorted(by_step)]
    killed = outcome.get("killed")
    if killed is not None:
        lines.extend(f"  +{at - killed['at']:6.1f} s  {event} (generation {gen})"
                     for event, gen, at in outcome["timeline"] if at >= killed["at"])
    rec = outcome.get("recovery_s")
    lines.append(f"generations: {outcome['generations']}, failures handled: "
                 f"{len(outcome['failures'])}, resumed at step {outcome.get('resumed_at_step')}, "
                 f"recovery {'n/a' if rec is None else f'{rec:.1f} s'} (kill -> first step)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
