"""What every benchmark report shares: percentiles, the machine's load, and the result file.

* `percentile(values, q)`: the nearest-rank percentile (the smallest value with at least a
  fraction `q` of the values at or below it), q in 0..1; None for no values.
* The load: the 1-minute load average (`os.getloadavg()[0]`, rounded to 0.01) read right before
  and right after what was measured, under the keys `load_avg_1m_before` and
  `load_avg_1m_after` (`load_before()` / `load_after()` return them as a one-key dict to merge
  into a report). A figure taken while the load was high is suspect: the two numbers say whether
  it was. (Before this module the reports named it `load_before`/`load_after`, some with the 1, 5
  and 15-minute averages, `load_average_at_start`, `load`: older result files use those names.)
* `write_result(name, record)`: `<folder>/<UTC date>-<name>.json` (default folder
  `benchmarks/results/`), indented, so `git diff` of two runs reads line by line.

Stdlib only: the programs also run under torchmonarch's interpreter, with this folder on
`sys.path` because each is started as `python benchmarks/<program>.py`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["LOAD_AFTER", "LOAD_BEFORE", "RESULTS", "load_after", "load_avg_1m", "load_before",
           "percentile", "write_result"]

RESULTS = Path(__file__).resolve().parent / "results"
LOAD_BEFORE = "load_avg_1m_before"
LOAD_AFTER = "load_avg_1m_after"


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile of `values` (any order), `q` in 0..1; None when there are none."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile: q must be a fraction in 0..1, not {q!r}.")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def load_avg_1m() -> float:
    """This machine's load average over the last minute, rounded to 0.01."""
    return round(os.getloadavg()[0], 2)


def load_before() -> dict[str, float]:
    """`{"load_avg_1m_before": ...}`: read it right before the measured part starts."""
    return {LOAD_BEFORE: load_avg_1m()}


def load_after() -> dict[str, float]:
    """`{"load_avg_1m_after": ...}`: read it right after the measured part ends."""
    return {LOAD_AFTER: load_avg_1m()}


def write_result(name: str, record: dict[str, Any], folder: Path = RESULTS,
                 started: datetime.datetime | None = None) -> Path:
    """Write `record` to `<folder>/<UTC date of started (default now)>-<name>.json`; its path."""
    when = started or datetime.datetime.now(datetime.timezone.utc)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{when.astimezone(datetime.timezone.utc).date().isoformat()}-{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path
