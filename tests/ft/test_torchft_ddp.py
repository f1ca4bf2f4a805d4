"""torchft's fault-tolerant DDP under monarch (cookbook/torchft_ddp.py), run as a script.

Two replica groups train over gloo with a lighthouse actor; one group's proc is SIGKILLed. The
survivor must keep committing steps alone, the respawned group must heal from it (equal weights
from its first step back) and both must train together to the step target. The recipe prints
its record as JSON; these checks read it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torchft", reason="torchft (the `titan` extra) is not installed")

RECIPE = Path(__file__).resolve().parents[2] / "cookbook" / "torchft_ddp.py"

pytestmark = pytest.mark.timeout(120)


def _run(steps: int, kill_at: int) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(RECIPE), "--steps", str(steps), "--kill-at", str(kill_at), "--json"],
        check=False, capture_output=True, text=True, timeout=110,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return record


def test_killed_replica_rejoins_healed_and_training_reaches_the_target() -> None:
    record = _run(steps=16, kill_at=4)
    steps = [s["results"] for s in record["steps"]]
    # Every controller step committed exactly one step: none lost to the kill or the rejoin.
    assert [r[0]["step"] for r in steps] == list(range(1, len(steps) + 1))
    assert steps[-1][0]["step"] >= 16

    before = steps[:4]
    assert all(len(r) == 2 and r[0]["replicas"] == 2 for r in before)
    assert record["fault"] == "replica1"
    assert record["pids"]["killed"] != record["pids"]["replacement"]

    alone = [r for r in steps[4:] if len(r) == 1]
    assert alone, "the survivor trained no step alone"
    assert all(r[0]["group"] == 0 and r[0]["replicas"] == 1 for r in alone)
    assert steps[4:4 + len(alone)] == alone  # the survivor alone right after the kill

    rejoin, *after = steps[4 + len(alone):]
    survivor, healed = rejoin
    assert (survivor["group"], healed["group"]) == (0, 1)
    assert survivor["replicas"] == healed["replicas"] == 2
    assert healed["healing"] and not survivor["healing"]
    assert healed["step"] == survivor["step"]  # it took the survivor's step, not 0
    assert healed["digest"] == survivor["digest"]  # and its weights
    assert len(after) >= 3
    for pair in after:
        assert [r["replicas"] for r in pair] == [2, 2]
        assert not any(r["healing"] for r in pair)
        assert pair[0]["digest"] == pair[1]["digest"]
    assert record["weights_equal"]

    losses = [r[0]["loss"] for r in steps]
    assert sum(losses[-3:]) < sum(losses[:3])  # and it learned
    assert 0 < record["failover_seconds"] < record["recovery_seconds"]
