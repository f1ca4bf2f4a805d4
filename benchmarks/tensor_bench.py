"""W8 of shared/PERFORMANCE.md: the tensor engine on a 2-proc CPU mesh.

    python benchmarks/tensor_bench.py [--quick] [--repeats N]

prints ONE JSON object on stdout:

    {"W8": {"ops_per_s": ...,                  # 1,000 small ops then one fetch, median
            "reduce_ms": ..., "reduce_inplace_ms": ...,   # 16 MiB sum across 2 procs, median
            "gloo_allreduce_ms": ...,          # raw gloo all_reduce, 2 plain processes, median
            "reduce_ratio": ..., "reduce_inplace_ratio": ...}}   # ours / raw (target <= 1.5)

The raw baseline runs in the same run: two `multiprocessing` processes with a
`ProcessGroupGloo` over a `TCPStore` on loopback, timing `allreduce` of the same 16 MiB; its
samples are interleaved with the engine's so both see the same machine load. Each engine
sample includes one fetch round trip (`fetch_ms`). It prints numbers; it never asserts a time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import statistics
import sys
import time
from typing import Any

from _report import load_after, load_before

MIB16 = 16 * 1024 * 1024 // 4  # float32 elements in 16 MiB


def _gloo_peer(rank: int, port: int, inq: Any, out: Any) -> None:
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=60)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    opts._timeout = timeout
    pg = dist.ProcessGroupGloo(dist.PrefixStore("raw/", store), rank, 2, opts)
    x = torch.ones(MIB16)
    for _ in range(3):
        pg.allreduce([x]).wait()
    out.put(("ready", rank))
    while True:
        iters = inq.get()
        if iters is None:
            return
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            pg.allreduce([x]).wait()
            times.append(time.perf_counter() - t0)
        if rank == 0:
            out.put(("times", times))


class RawGloo:
    """Two plain processes doing gloo all_reduce of 16 MiB on request, so that samples of the
    baseline can be interleaved with the engine's (the machine's load changes over a run)."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        ctx = multiprocessing.get_context("spawn")
        self.out = ctx.Queue()
        self.inqs = [ctx.Queue(), ctx.Queue()]
        self.procs = [
            ctx.Process(target=_gloo_peer, args=(r, self.store.port, self.inqs[r], self.out))
            for r in range(2)
        ]
        for p in self.procs:
            p.start()
        for _ in range(2):
            self.out.get(timeout=120)

    def sample_ms(self, iters: int = 1) -> float:
        """Median ms of `iters` all_reduce calls."""
        for q in self.inqs:
            q.put(iters)
        _, times = self.out.get(timeout=120)
        return statistics.median(times) * 1e3

    def close(self) -> None:
        for q in self.inqs:
            q.put(None)
        for p in self.procs:
            p.join(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller smoke run")
    parser.add_argument("--repeats", type=int, default=0, help="samples per figure")
    args = parser.parse_args()
    before = load_before()
    repeats = args.repeats or (3 if args.quick else 9)

    import torch

    import monarch
    from monarch.actor import this_host

    result: dict[str, Any] = {}
    raw = RawGloo()
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        with procs.activate():
            acc = torch.zeros(16)
            for _ in range(200):
                acc = acc + 1
            monarch.inspect(acc)
            rates = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(1000):
                    acc = acc * 1.0 + 1
                monarch.inspect(acc[0])
                rates.append(2000 / (time.perf_counter() - t0))  # two ops per iteration
            result["ops_per_s"] = statistics.median(rates)

            big = torch.ones(MIB16)
            for _ in range(3):
                monarch.inspect(big.reduce("gpus")[0])

            def timed(fn: Any) -> float:
                t0 = time.perf_counter()
                r = fn()
                monarch.inspect(r[0])
                return (time.perf_counter() - t0) * 1e3

            # Interleaved samples: ours, then the raw baseline, under the same load.
            ours, ours_inplace, base = [], [], []
            for _ in range(repeats):
                ours.append(timed(lambda: big.reduce("gpus")))
                ours_inplace.append(timed(lambda: big.reduce_("gpus")))
                base.append(raw.sample_ms())
            result["reduce_ms"] = statistics.median(ours)
            result["reduce_inplace_ms"] = statistics.median(ours_inplace)
            result["gloo_allreduce_ms"] = statistics.median(base)
            # The fetch round trip included in each sample above.
            result["fetch_ms"] = statistics.median(timed(lambda: big) for _ in range(repeats))
    finally:
        procs.stop().get(timeout=60)
        raw.close()
    result["reduce_ratio"] = result["reduce_ms"] / result["gloo_allreduce_ms"]
    result["reduce_inplace_ratio"] = result["reduce_inplace_ms"] / result["gloo_allreduce_ms"]
    print(json.dumps({"system": "monarch-dask", "quick": args.quick, "W8": result, **before,
                      **load_after()}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
