"""The cookbook recipes run as scripts, as a user would run them, and do what they say."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"

pytestmark = pytest.mark.timeout(120)


def _run(name: str) -> str:
    result = subprocess.run(
        [sys.executable, str(COOKBOOK / name)], capture_output=True, text=True, timeout=100
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_demo_runs_every_adverb_and_stops() -> None:
    out = _run("demo.py")
    assert "Accumulator sum: 24" in out
    assert "send to a ranked port: [(0, 11), (1, 11), (2, 1), (3, 1)]" in out
    assert "stopped; every proc exited" in out


def test_fault_tolerant_workers_replace_a_killed_worker() -> None:
    out = _run("fault_tolerant_workers.py")
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert lines["squares"] == lines["after the kill, squares"] == "[0, 1, 4, 9, 16, 25]"
    before = ast.literal_eval(lines["worker pids"])
    after = ast.literal_eval(lines["worker pids now"])
    assert before[0] == after[0] and before[2] == after[2]
    assert before[1] != after[1]


def _lines(out: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def test_ping_pong_rallies_alternate_between_the_two_meshes() -> None:
    lines = _lines(_run("ping_pong.py"))
    rally = " ".join(["ping", "pong"] * 5)
    assert lines["table 0 rally"] == lines["table 1 rally"] == rally
    assert lines["ping hits"] == lines["pong hits"] == "[5, 5]"


def test_parameter_server_workers_reduce_the_loss() -> None:
    out = _run("parameter_server.py")
    lines = _lines(out)
    assert lines["updates applied"] == "20"
    assert lines["loss decreased"] == "True"
    assert lines["weights"] == "[1.99, -3.01, 0.49] true: [2.0, -3.0, 0.5]"
    assert "round  0 loss 9.7808" in out
    assert out.endswith("stopped\n")


def test_pipeline_stages_forward_items_in_order_through_ports() -> None:
    lines = _lines(_run("pipeline.py"))
    expected = [f"<{x * x + 1}>" for x in range(10)]
    assert lines["results"] == repr(expected)
    assert lines["handled per stage"] == "[10, 10, 10]"


def test_load_balancing_choose_runs_every_task_once() -> None:
    lines = _lines(_run("load_balancing.py"))
    per_worker = ast.literal_eval(lines["tasks per worker (varies)"])
    assert len(per_worker) == 4 and sum(per_worker) == 40
    assert lines["tasks handled in all"] == "40"
    assert lines["results correct"] == "True"
    assert lines["primes below 1000 and 4900"] == "168 654"


def test_grpo_loop_raises_the_probability_of_the_rewarded_token() -> None:
    lines = _lines(_run("grpo_loop.py"))
    assert lines["improved"] == "True"
    assert lines["generator always sampled with the latest weights"] == "True"
    assert lines["P(rewarded token) before"] == "0.24"
    assert lines["P(rewarded token) after"] == "0.65"
