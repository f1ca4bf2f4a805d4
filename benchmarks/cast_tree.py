"""Casts as a tree: what the controller sends and receives per `call()`, flat against tree.

Prints one JSON report; asserts nothing. Run from the repository root:

    .venv/bin/python benchmarks/cast_tree.py [--hosts 4] [--procs 4] [--calls 200] [--pad 0]

It starts `--hosts` loopback `monarch worker` hosts, spawns `--procs` procs on each and one
actor per proc, then measures `call()` to all of them with `cast_tree="off"` (one CALL per rank
from the controller, one reply per rank) and `cast_tree="always"` (one relay control per host,
one batch back per host), in alternating rounds. `--sweep 2x1,2x4,4x4` measures each
hosts x procs in turn and reports, per size, the tree's p50 against the flat cast's: where the
tree starts to win is what `cast_tree="auto"` uses (`relay.TREE_MIN_RANKS`).
Per mode: the controller's envelopes written per call (CALLs and relay controls), the bytes its
transport wrote and read per call (every frame, heartbeats included), the controller's CPU time
per call (all its threads), and the call() latency p50 / p99 (µs).
The load is `_report`'s `load_avg_1m_before`/`load_avg_1m_after` (reports before it had
`load_before`/`load_after`, the 1, 5 and 15-minute averages).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from _report import load_after, load_before

from monarch._src.hosts.local_workers import LocalWorkers
from monarch._src.runtime.envelope import CALL, CONTROL
from monarch._src.runtime.runtime import get_runtime
from monarch._src.transport import comm
from monarch.actor import Actor, attach_to_workers, endpoint
from monarch.config import configured


class Echo(Actor):
    @endpoint
    def echo(self, pad: bytes) -> int:
        return len(pad)


class Counters:
    """The controller's casts written, and the bytes its transport wrote and read."""

    def __init__(self) -> None:
        self.casts = 0
        self.out = 0
        self.into = 0
        transport = get_runtime().mailbox.transport
        send, encode, decode = transport.send, comm.encode_batch, comm.decode_batch
        send_direct = transport.send_direct

        def is_cast(env: Any) -> bool:
            return env[0] == CALL or (env[0] == CONTROL and env.op in ("relay", "relay_cast"))

        def spy_send(addr: str, env: Any, written: Any = None) -> None:
            self.casts += is_cast(env)
            send(addr, env, written)

        def spy_direct(addr: str, env: Any) -> bool:  # written by the calling thread itself
            sent: bool = send_direct(addr, env)
            self.casts += sent and is_cast(env)
            return sent

        def spy_encode(envs: Any) -> list[Any]:
            frames = encode(envs)
            self.out += sum(memoryview(f).nbytes for f in frames)
            return frames

        def spy_decode(frames: Any) -> Any:
            self.into += sum(memoryview(f).nbytes for f in frames)
            return decode(frames)

        transport.send = spy_send  # type: ignore[method-assign]  # benchmark probe
        transport.send_direct = spy_direct  # type: ignore[method-assign]  # benchmark probe
        comm.encode_batch = spy_encode  # type: ignore[assignment]  # benchmark probe
        comm.decode_batch = spy_decode  # type: ignore[assignment]  # benchmark probe

    def snapshot(self) -> tuple[int, int, int]:
        return self.casts, self.out, self.into


def _round(mesh: Any, mode: str, calls: int, pad: bytes, counters: Counters,
           into: dict[str, dict[str, list[float]]]) -> None:
    with configured(cast_tree=mode):
        for _ in range(10):
            mesh.echo.call(pad).get(timeout=60)
        before = counters.snapshot()
        cpu = time.process_time()
        samples = []
        for _ in range(calls):
            t = time.perf_counter()
            mesh.echo.call(pad).get(timeout=60)
            samples.append(time.perf_counter() - t)
        cpu = time.process_time() - cpu
        after = counters.snapshot()
    figures = into[mode]
    figures["controller_cpu_us_per_call"].append(cpu / calls * 1e6)
    figures["envelopes_per_call"].append((after[0] - before[0]) / calls)
    figures["bytes_out_per_call"].append((after[1] - before[1]) / calls)
    figures["bytes_in_per_call"].append((after[2] - before[2]) / calls)
    samples.sort()
    figures["p50_us"].append(statistics.median(samples) * 1e6)
    figures["p99_us"].append(samples[int(len(samples) * 0.99) - 1] * 1e6)


MODES = ("off", "always")  # the flat cast and the tree


def measure(n_hosts: int, n_procs: int, calls: int, rounds: int, pad_bytes: int) -> dict[str, Any]:
    """One size: `n_hosts` loopback worker hosts with `n_procs` procs each."""
    report: dict[str, Any] = {
        "workload": f"call() to {n_hosts} loopback hosts x {n_procs} procs",
        "pad_bytes": pad_bytes, "calls_per_round": calls, "rounds": rounds,
        **load_before(),
    }
    workers = LocalWorkers(n_hosts)
    try:
        addresses = [f.result(timeout=60) for f in workers.futures()]
        hosts = attach_to_workers(ca="trust_all_connections", workers=addresses)
    except BaseException:
        workers.close()
        raise
    try:
        procs = hosts.spawn_procs(per_host={"procs": n_procs})
        mesh = procs.spawn("echo", Echo)
        mesh.echo.call(b"").get(timeout=120)
        counters = Counters()
        pad = b"x" * pad_bytes
        keys = ("envelopes_per_call", "bytes_out_per_call", "bytes_in_per_call",
                "controller_cpu_us_per_call", "p50_us", "p99_us")
        raw: dict[str, dict[str, list[float]]] = {m: {k: [] for k in keys} for m in MODES}
        for _ in range(rounds):
            for mode in MODES:
                _round(mesh, mode, calls, pad, counters, raw)
        for mode, figures in raw.items():
            report[mode] = {k: round(statistics.median(v), 1) for k, v in figures.items()}
        report["tree_vs_flat"] = {
            k: round(report["always"][k] / report["off"][k], 3) for k in keys if report["off"][k]}
        report.update(load_after())
        procs.stop().get(timeout=60)
    finally:
        hosts.shutdown().get(timeout=60)
        workers.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--procs", type=int, default=4, help="procs per host")
    parser.add_argument("--calls", type=int, default=200, help="calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode, alternating")
    parser.add_argument("--pad", type=int, default=0, help="bytes of argument per call")
    parser.add_argument("--sweep", default="",
                        help="sizes HOSTSxPROCS, comma-separated, in place of --hosts/--procs")
    args = parser.parse_args()
    if not args.sweep:
        report = measure(args.hosts, args.procs, args.calls, args.rounds, args.pad)
    else:
        sizes = [tuple(int(n) for n in size.split("x")) for size in args.sweep.split(",")]
        report = {"sizes": {}, **load_before()}
        for n_hosts, n_procs in sizes:
            one = measure(n_hosts, n_procs, args.calls, args.rounds, args.pad)
            report["sizes"][f"{n_hosts}x{n_procs}"] = one
            print(f"[cast_tree] {n_hosts}x{n_procs}: tree/flat p50 "
                  f"{one['tree_vs_flat'].get('p50_us')}", file=sys.stderr, flush=True)
        wins = [n_hosts * n_procs for n_hosts, n_procs in sizes
                if report["sizes"][f"{n_hosts}x{n_procs}"]["tree_vs_flat"].get("p50_us", 9) < 1]
        report["smallest_size_where_the_tree_wins_p50"] = min(wins) if wins else None
        report.update(load_after())
    print(json.dumps(report, indent=1), flush=True)


if __name__ == "__main__":
    main()
