"""The simulator's validation harness (`benchmarks/simulator_validation.py`) at tiny sizes:
every model and batch size is measured on real procs and predicted under both CPU profiles,
and the report has the figures, finite and positive. Timed targets belong to the benchmark."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(120)

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _harness() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("simulator_validation")


def test_probe_shares_no_shape_with_the_models() -> None:
    harness = _harness()
    from monarch._src.simulator import calibrate

    probe = {*calibrate.PROBE_SMALL_MM, calibrate.PROBE_LARGE_MM}
    for cfg, _ in harness.SIZES["full"].values():
        assert not probe & set(cfg.values()), cfg


def test_validation_harness_tiny() -> None:
    harness = _harness()
    report = harness.validate(rounds=1, steps=1, warmup=1, size="tiny")
    cases = report["cases"]
    assert [(c["model"], c["batch"]) for c in cases] == [
        (name, b) for name in ("mlp", "transformer", "convnet")
        for b in harness.SIZES["tiny"][name][1]]
    for case in cases:
        assert case["measured_step_s"] > 0 and case["measured_peak_bytes"] > 0
        for key in ("engine", "cpu"):
            pred = case[key]
            for field in ("predicted_step_s", "time_ratio", "predicted_peak_bytes",
                          "memory_ratio"):
                assert math.isfinite(pred[field]) and pred[field] > 0, (case["model"], key)
    # Larger batches hold more activations, in the prediction and on the real workers.
    for name in ("transformer", "convnet"):
        small, large = [c for c in cases if c["model"] == name]
        assert large["measured_peak_bytes"] > small["measured_peak_bytes"]
        assert large["engine"]["predicted_peak_bytes"] > small["engine"]["predicted_peak_bytes"]
    assert set(report["summary"]) == {"engine_time", "engine_memory", "cpu_time", "cpu_memory"}
    assert report["memory_hand_count"]["exact"]
    assert len(report["calibrations"]) == 1
