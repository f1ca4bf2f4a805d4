"""Micro-benchmark of `monarch._src.transport.serialization`: one process, no transport.

    python benchmarks/serialization_micro.py [--repeats N]

prints ONE JSON object on stdout:

    {"small_tuple_us": ..., "small_tuple_pickle_us": ...,
     "numpy_64MiB_GBps": ..., "torch_64MiB_GBps": ...,
     "numpy_64MiB_readonly_GBps": ..., "torch_64MiB_readonly_GBps": ...}

`small_tuple_us` is the median time of one `dumps` + `loads` of `(1, "x", None)`, and
`small_tuple_pickle_us` the same with plain `pickle.dumps` + `pickle.loads` for scale. The GB/s
figures are 64 MiB divided by the median time of one `dumps` + `loads`. In the plain figures the
receiver gets the sender's buffers as they are (writable, as a socket reading into a bytearray
gives them), so both sides are zero-copy; the `_readonly` figures hand `loads` read-only `bytes`,
which costs numpy nothing and torch one copy. This program prints numbers; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any

from _report import load_after, load_before

from monarch._src.transport.serialization import dumps, loads

_PAYLOAD_BYTES = 64 * 1024 * 1024


def _median_seconds(run: Callable[[], Any], repeats: int, inner: int = 1) -> float:
    run()  # warm-up: first-use imports and allocations
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def _round_trip(obj: Any) -> Any:
    data, buffers = dumps(obj)
    return loads(data, buffers)


def _round_trip_readonly(obj: Any) -> Callable[[], Any]:
    """`dumps` + `loads`, where `loads` gets read-only copies of the buffers made beforehand."""
    data, buffers = dumps(obj)
    frozen = [bytes(buffer) for buffer in buffers]

    def run() -> Any:
        dumps(obj)
        return loads(data, frozen)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    before = load_before()

    import numpy as np
    import torch

    small = (1, "x", None)
    array = np.random.default_rng(0).random(_PAYLOAD_BYTES // 8)
    tensor = torch.rand(_PAYLOAD_BYTES // 4)

    def gbps(seconds: float) -> float:
        return round(_PAYLOAD_BYTES / seconds / 1e9, 2)

    result = {
        "small_tuple_us": round(
            _median_seconds(lambda: _round_trip(small), args.repeats, inner=10_000) * 1e6, 3
        ),
        "small_tuple_pickle_us": round(
            _median_seconds(
                lambda: pickle.loads(pickle.dumps(small, protocol=5)), args.repeats, inner=10_000
            )
            * 1e6,
            3,
        ),
        "numpy_64MiB_GBps": gbps(_median_seconds(lambda: _round_trip(array), args.repeats)),
        "torch_64MiB_GBps": gbps(_median_seconds(lambda: _round_trip(tensor), args.repeats)),
        "numpy_64MiB_readonly_GBps": gbps(
            _median_seconds(_round_trip_readonly(array), args.repeats)
        ),
        "torch_64MiB_readonly_GBps": gbps(
            _median_seconds(_round_trip_readonly(tensor), args.repeats)
        ),
    }
    result.update(before, **load_after())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
