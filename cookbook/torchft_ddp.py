"""Fault-tolerant data parallelism with torchft, driven by a monarch controller.

Run: `.venv/bin/python cookbook/torchft_ddp.py` (needs torchft, the `titan` extra; CPU and gloo
over loopback are enough). torchft keeps data-parallel training going while replicas come and go:
a lighthouse decides, step by step, which replica groups form the quorum, and each replica's
`Manager` reconfigures its gloo process group to that quorum and heals a replica that (re)joins
behind the others by copying the live replicas' model and optimizer state to it.

Here every torchft piece lives in a monarch actor on a proc of its own: the lighthouse, and one
`Replica` per replica group (a `Manager`, the model wrapped in torchft's DDP, Adam wrapped in its
optimizer). The client is the controller: it runs the steps in lockstep, one `train_step` call
per replica, and prints the step, the replicas in the quorum and each replica's loss. Midway it
SIGKILLs one replica's proc; the fault reaches the client's `unhandled_fault_hook`, which only
records it (the controller handles it). The survivor keeps training alone (the lighthouse drops
the dead replica once its heartbeats stop); after its first step alone the controller spawns a
new proc mesh and a fresh `Replica` for the same group. That one joins at step 0, torchft heals
it from the survivor, and from then on both train again with identical weights, which every step
checks.

Lockstep needs care after the kill and at the rejoin. A quorum needs more than half of the
replicas that heartbeat, so a replacement heartbeating before the survivor formed its first quorum
alone would hold the survivor's request until the replacement asks too. The lighthouse grants a
quorum at once when every member of the previous one asks again ("fast quorum"), so a survivor
asking first gets a quorum of its own even while the replacement heartbeats; the replacement's
request, in turn, waits for a majority of the live replicas. So the controller keeps stepping the
survivor while the replacement's first step is pending, until a quorum holds both.

`--json` prints the run's record as one JSON line instead (what the test reads).
"""

from __future__ import annotations

import os

# Before torch and monarch are imported: torch reads its log level once, at import, and the procs
# inherit this environment. Quiet torch's C++ warning that DDP (which torchft runs with
# find_unused_parameters=True) found no unused parameter, and the INFO lines torchft's Rust
# servers write for every quorum. The HTTP server's line for each heal's checkpoint GET stays.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
os.environ.setdefault("RUST_LOG", "warn")

import argparse
import concurrent.futures
import hashlib
import json
import logging
import queue
import signal
import time
import warnings
from datetime import timedelta
from typing import Any

import torch
from torch import nn
from torch.distributed import TCPStore
from torchft import DistributedDataParallel, Manager, ProcessGroupGloo
from torchft.coordination import LighthouseServer
from torchft.optim import OptimizerWrapper

import monarch.actor
from monarch.actor import Actor, MeshFailure, endpoint, this_host

FEATURES = 16
BATCH = 32
# Replica groups whose heartbeats stop for this long leave the quorum: the survivor's failover time.
HEARTBEAT_TIMEOUT_MS = 1000
# How long a quorum waits for a heartbeating replica that has not asked to join yet. Lockstep
# replicas ask within milliseconds of each other; a longer wait only covers a loaded machine.
JOIN_TIMEOUT_MS = 5000
# Steps both replicas train after the rejoin, even when the survivor alone reached the target.
MIN_STEPS_TOGETHER = 3


class Lighthouse(Actor):
    """torchft's lighthouse server, on its proc: the replicas' managers ask it for each quorum."""

    def __init__(self, min_replicas: int) -> None:
        self.server = LighthouseServer(
            bind="[::]:0",
            min_replicas=min_replicas,
            join_timeout_ms=JOIN_TIMEOUT_MS,
            heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
        )

    @endpoint
    def address(self) -> str:
        return self.server.address()


def make_model() -> nn.Module:
    """The same initial weights in every replica (torchft would sync them at step 0 anyway)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))


def batch(step: int, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This group's shard of step `step`: a noisy linear target the model can learn."""
    true_weights = torch.linspace(-1.0, 1.0, FEATURES).unsqueeze(1)
    gen = torch.Generator().manual_seed(1000 * step + group)
    x = torch.randn(BATCH, FEATURES, generator=gen)
    return x, x @ true_weights + 0.01 * torch.randn(BATCH, 1, generator=gen)


class Replica(Actor):
    """One replica group (a single rank here): DDP training under a torchft `Manager`.

    The `Manager` starts heartbeating to the lighthouse as soon as it exists; it asks for a
    quorum at the start of each `train_step`, and heals this replica there when it is behind.
    """

    def __init__(self, group: int, lighthouse_addr: str) -> None:
        # On CPU torchft warns at every new quorum that it has no NCCL flight recorder to reset,
        # and torch that the checkpoint a healing replica receives sits in a read-only buffer
        # (torchft's HTTP transport loads it from there; the tensors are copied into the model).
        logging.getLogger("torchft.manager").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        self.group = group
        self.model = make_model()
        self.optim = torch.optim.Adam(self.model.parameters(), lr=0.01)
        # The replica group's store: its ranks find their manager through it (one rank here).
        self.store = TCPStore("localhost", 0, is_master=True, wait_for_workers=False)
        # Reconfigured by the manager for each quorum, over all its replicas (healing ones too).
        self.pg = ProcessGroupGloo(timeout=timedelta(seconds=10))
        self.manager = Manager(
            pg=self.pg,
            load_state_dict=self._load_state,
            state_dict=self._state,
            min_replica_size=1,
            replica_id=f"group{group}",
            lighthouse_addr=lighthouse_addr,
            store_addr="localhost",
            store_port=self.store.port,
            rank=0,
            world_size=1,
            timeout=timedelta(seconds=10),
            quorum_timeout=timedelta(seconds=30),
            connect_timeout=timedelta(seconds=10),
        )
        self.ddp = DistributedDataParallel(self.manager, self.model)
        self.ft_optim = OptimizerWrapper(self.manager, self.optim)

    def _state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optim": self.optim.state_dict()}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optim.load_state_dict(state["optim"])

    @endpoint
    def train_step(self) -> dict[str, Any]:
        """One step: quorum, forward, backward (gradients averaged over the quorum), commit."""
        start = time.perf_counter()
        self.ft_optim.zero_grad()  # starts this step's quorum; a replica behind heals in it
        x, y = batch(self.manager.current_step(), self.group)
        loss = nn.functional.mse_loss(self.ddp(x), y)
        loss.backward()  # waits for the quorum: the process group now spans it
        healing = not self.manager.is_participating()
        self.ft_optim.step()  # updates only if every replica in the quorum committed
        return {
            "group": self.group,
            "step": self.manager.current_step(),
            "replicas": self.pg.size(),
            "healing": healing,
            "loss": loss.item(),
            "digest": self._digest(),
            "seconds": time.perf_counter() - start,
        }

    def _digest(self) -> str:
        h = hashlib.sha256()
        for tensor in self.model.state_dict().values():
            h.update(tensor.detach().numpy().tobytes())
        return h.hexdigest()[:16]

    @endpoint
    def weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    @endpoint
    def pid(self) -> int:
        return os.getpid()


def start_replica(group: int, lighthouse_addr: str) -> tuple[Any, Any]:
    """A fresh proc mesh and `Replica` actor for replica group `group`."""
    procs = this_host().spawn_procs(per_host={"procs": 1}, name=f"group{group}")
    return procs, procs.spawn(f"replica{group}", Replica, group, lighthouse_addr)


def show(results: list[dict[str, Any]], wall: float) -> None:
    """One controller step: the manager's step, the replicas in its quorum, each one's loss."""
    healing = sum(r["healing"] for r in results)
    digests = {r["digest"] for r in results}
    print(f"step {results[0]['step']:3d} | replicas in quorum {max(r['replicas'] for r in results)}"
          + (f" ({healing} healing)" if healing else "")
          + " | loss " + " ".join(f"g{r['group']} {r['loss']:.4f}" for r in results)
          + ("" if len(results) == 1 else " | weights " + ("equal" if len(digests) == 1
                                                           else "DIFFERENT"))
          + f" | {wall * 1000:.0f} ms", flush=True)


def run(steps: int, kill_at: int, victim: int = 1) -> dict[str, Any]:
    """Train 2 replica groups to manager step `steps` (and `MIN_STEPS_TOGETHER` steps after the
    rejoin), SIGKILLing group `victim` after step `kill_at`; the survivor trains alone until the
    replacement is up, which then rejoins. Returns what happened, step by step."""
    if not 0 < kill_at < steps:
        raise ValueError(f"run(): kill_at={kill_at} must lie between 0 and steps={steps}")
    faults: queue.Queue[str] = queue.Queue()

    def on_fault(failure: MeshFailure) -> None:
        faults.put(failure.mesh_name)  # handled by the controller below: it replaces the replica

    previous_hook = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = on_fault
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)  # waits the loop polls
    lighthouse_procs = this_host().spawn_procs(name="lighthouse")
    meshes = [lighthouse_procs]
    record: dict[str, Any] = {"steps": []}

    def lockstep(groups: list[Any]) -> list[dict[str, Any]]:
        start = time.perf_counter()
        futures = [g.train_step.call_one() for g in groups]
        results = [f.get() for f in futures]
        wall = time.perf_counter() - start
        record["steps"].append({"wall": wall, "results": results})
        show(results, wall)
        return results

    try:
        addr = lighthouse_procs.spawn("lighthouse", Lighthouse, 1).address.call_one().get()
        started = [start_replica(g, addr) for g in (0, 1)]
        meshes += [procs for procs, _ in started]
        replicas = [actor for _, actor in started]
        # Both managers heartbeat before the first quorum, so it waits for both (a majority).
        pids = [r.pid.call_one().get() for r in replicas]
        survivor = replicas[1 - victim]
        step = 0
        while step < kill_at:
            step = lockstep(replicas)[0]["step"]

        os.kill(pids[victim], signal.SIGKILL)
        killed = time.perf_counter()
        print(f"killed replica group {victim} (pid {pids[victim]})", flush=True)
        record["fault"] = faults.get(timeout=30)  # the client hears of the dead proc mesh
        # The survivor's next quorum waits out the dead one's heartbeat timeout, then it trains
        # alone. The replacement starts only after that step: a replacement heartbeating while
        # the survivor's first request waits would make the survivor a minority of the healthy
        # replicas (1 of 2), and its quorum would wait for a request the controller sends later.
        step = lockstep([survivor])[0]["step"]
        record["failover_seconds"] = time.perf_counter() - killed
        procs, replacement = start_replica(victim, addr)
        meshes.append(procs)
        ready = pool.submit(replacement.pid.call_one().get)
        # From now on the survivor's previous quorum is itself alone, which the lighthouse grants
        # again at once ("fast quorum"), so it keeps training while the replacement comes up.
        while not ready.done():
            step = lockstep([survivor])[0]["step"]
        record["replacement_up_seconds"] = time.perf_counter() - killed
        record["pids"] = {"killed": pids[victim], "replacement": ready.result()}

        # The replacement asks for a quorum, which needs the survivor: it is in the first quorum
        # the survivor asks for after that request reached the lighthouse; it heals there.
        joined = pool.submit(replacement.train_step.call_one().get)
        while True:
            start = time.perf_counter()
            alone = survivor.train_step.call_one().get()
            if alone["replicas"] == 2:
                results = sorted([alone, joined.result(timeout=60)], key=lambda r: r["group"])
                wall = time.perf_counter() - start
                record["steps"].append({"wall": wall, "results": results})
                show(results, wall)
                break
            record["steps"].append({"wall": time.perf_counter() - start, "results": [alone]})
            show([alone], time.perf_counter() - start)
            if joined.done():  # it ended without the survivor: its error says why
                raise RuntimeError(f"the replacement left its first step alone: {joined.result()}")
        record["recovery_seconds"] = time.perf_counter() - killed
        replicas[victim] = replacement

        step, together = results[0]["step"], 0
        while step < steps or together < MIN_STEPS_TOGETHER:
            step, together = lockstep(replicas)[0]["step"], together + 1
        final = [r.weights.call_one().get() for r in replicas]
        record["weights_equal"] = all(torch.equal(final[0][k], final[1][k]) for k in final[0])
        return record
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for mesh in meshes:  # the killed group's too: stopping what is left of it is harmless
            mesh.stop().get(timeout=30)
        monarch.actor.unhandled_fault_hook = previous_hook


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="the manager step to train to")
    parser.add_argument("--kill-at", type=int, default=8, help="SIGKILL a replica after this step")
    parser.add_argument("--json", action="store_true", help="print the record as one JSON line")
    args = parser.parse_args()
    record = run(args.steps, args.kill_at)
    if args.json:
        print(json.dumps(record))
        return
    step_ms = sorted(s["wall"] * 1000 for s in record["steps"])
    print(f"fault reported for mesh: {record['fault']}")
    print(f"failover (kill -> survivor's first step alone): {record['failover_seconds']:.2f} s")
    print(f"recovery (kill -> replacement healed, in quorum): {record['recovery_seconds']:.2f} s")
    print(f"median step: {step_ms[len(step_ms) // 2]:.0f} ms")
    print(f"weights equal at the end: {record['weights_equal']}")


if __name__ == "__main__":
    main()
