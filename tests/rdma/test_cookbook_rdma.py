"""The RDMA parameter-server recipe runs as a script and converges to the true weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RECIPE = Path(__file__).resolve().parents[2] / "cookbook" / "rdma_parameter_server.py"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_rdma_parameter_server_workers_pull_weights_and_converge() -> None:
    res = subprocess.run([sys.executable, str(RECIPE)], capture_output=True, text=True,
                         timeout=100, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in res.stdout.splitlines() if ": " in line)
    assert lines["weights buffer"] == "32 bytes, reached by tcp"  # Monarch's backend name
    assert lines["updates applied"] == "30"
    assert lines["loss decreased"] == "True"
    assert lines["true"] == "[-2.0, -1.43, -0.86, -0.29, 0.29, 0.86, 1.43, 2.0]"
    weights = [float(v) for v in lines["weights"].strip("[]").split(", ")]
    truth = [float(v) for v in lines["true"].strip("[]").split(", ")]
    assert max(abs(a - b) for a, b in zip(weights, truth)) < 0.05
    assert "round  0 loss 13.4931" in res.stdout
    assert res.stdout.endswith("stopped\n")
