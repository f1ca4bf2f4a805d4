"""Interrupting a notebook cell that waits on a remote call, measured in a real Jupyter kernel.

For each endpoint kind (a sync endpoint sleeping in `time.sleep`, an async one awaiting
`asyncio.sleep`, a sync one spinning in pure Python), a cell calls it on a mesh of 2 procs for
30 s and waits with `.get()` (a cell waiting with top-level `await` is not measured: ipykernel
7.4 itself holds an interrupted `await` cell, `await asyncio.sleep(30)` included, until what it
awaits is done); the kernel is interrupted 2 s later (`KernelManager.interrupt_kernel`, SIGINT as
Jupyter's stop button sends). Reported per kind, median of `--runs`:

* `interrupt_to_idle_s`: from the interrupt to the kernel's `idle` status for that cell;
* `next_call_s`: the next cell's `call().get()` of a fast endpoint of the same actors, measured
  in the kernel (how long the interrupted work still holds the actors);
* `error_lines`: lines of traceback the interrupted cell shows.

`--repo DIR` runs the kernel against another checkout (e.g. the commit before a change, as a git
worktree) for a before/after comparison in one run. Prints one JSON report (with the load:
`_report`'s `load_avg_1m_before`/`_after`; reports before it had `load_before`/`load_after`, the
1, 5 and 15-minute averages).

    .venv/bin/python benchmarks/notebook_interrupt.py [--runs 3] [--repo DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from _report import load_after, load_before

REPO = Path(__file__).resolve().parents[1]

SETUP = """
import asyncio, time
from monarch.actor import Actor, endpoint, this_host

class Slow(Actor):
    @endpoint
    def sleep(self, s: float) -> str:
        time.sleep(s)
        return "slept"

    @endpoint
    def spin(self, s: float) -> int:
        end, n = time.monotonic() + s, 0
        while time.monotonic() < end:
            n += 1
        return n

    @endpoint
    def ping(self) -> str:
        return "pong"

class ASlow(Actor):
    @endpoint
    async def sleep(self, s: float) -> str:
        await asyncio.sleep(s)
        return "slept"

    @endpoint
    async def ping(self) -> str:
        return "pong"

procs = this_host().spawn_procs(per_host={"gpus": 2})
slow = procs.spawn("slow", Slow)
aslow = procs.spawn("aslow", ASlow)
slow.ping.call().get(); aslow.ping.call().get()
"""

KINDS = {
    "sync_sleep": ("slow.sleep.call(30).get()", "slow"),
    "async_sleep": ("aslow.sleep.call(30).get()", "aslow"),
    "sync_spin": ("slow.spin.call(30).get()", "slow"),
}


def until_idle(client: Any, msg_id: str, timeout: float = 120) -> list[dict[str, Any]]:
    """The iopub messages of request `msg_id` up to the kernel's idle status after it."""
    messages = []
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages


def _wait_busy_then(client: Any, msg_id: str) -> None:
    while True:
        msg = client.get_iopub_msg(timeout=60)
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input"):
            return


def measure(repo: Path, runs: int) -> dict[str, Any]:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo)
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(repo), env=env,
                                       startup_timeout=60)
    out: dict[str, Any] = {}
    try:
        until_idle(client, client.execute(textwrap.dedent(SETUP)))
        for kind, (cell, mesh) in KINDS.items():
            idle, nxt, lines = [], [], []
            for _ in range(runs):
                # Without stop_on_error, a probe sent right after the interrupted cell's
                # reply may be aborted by ipykernel (tests/notebook/kernel.py says why).
                msg_id = client.execute(cell, stop_on_error=False)
                _wait_busy_then(client, msg_id)
                time.sleep(2.0)  # the benchmark's point: interrupt a cell 2 s into its wait
                t0 = time.monotonic()
                manager.interrupt_kernel()
                messages = until_idle(client, msg_id)
                idle.append(time.monotonic() - t0)
                errors = [m["content"] for m in messages if m["msg_type"] == "error"]
                shown = "\n".join("\n".join(e.get("traceback", [])) for e in errors)
                lines.append(len(shown.splitlines()))
                probe = (f"_t = time.monotonic(); {mesh}.ping.call().get(timeout=60); "
                         "print(round(time.monotonic() - _t, 4))")
                msgs = until_idle(client, client.execute(probe))
                text = "".join(m["content"].get("text", "") for m in msgs
                               if m["msg_type"] == "stream")
                nxt.append(float(text.strip().splitlines()[-1]))
            out[kind] = {
                "interrupt_to_idle_s": round(statistics.median(idle), 3),
                "next_call_s": round(statistics.median(nxt), 3),
                "error_lines": int(statistics.median(lines)),
            }
        until_idle(client, client.execute("procs.stop().get(timeout=60)"))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repo", action="append", default=[],
                        help="another checkout to measure (repeatable); this one is always last")
    args = parser.parse_args()
    report: dict[str, Any] = {"workload": "notebook interrupt", "runs": args.runs,
                              **load_before()}
    for repo in [*map(Path, args.repo), REPO]:
        report[str(repo)] = measure(repo, args.runs)
    report.update(load_after())
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
