"""torchtitan's llama3 debug model, unmodified, trains on a monarch proc mesh and resumes.

The controller (this test) drives `cookbook/torchtitan/spmd_train.py`'s `train` on a 2x1 mesh:
two ranks run `cpu_launch.py` in-process through `monarch.spmd`, and each pushes its step
records to a `LossCollector` actor here. Run 1 trains steps 1-2 and writes torchtitan's
checkpoint at step 2; run 2 asks for 3 steps on the same dump folder, so torchtitan loads the
step-2 checkpoint and trains step 3 only.

The fault-tolerance test runs `cookbook/torchtitan/fault_tolerance.py`: rank 1 is SIGKILLed
after step 3, the supervisor's `__supervise__` ends that generation and a new mesh resumes from
the step-2 checkpoint to step 4, repeating step 3 with the same losses.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torchtitan", reason="the titan extra (torchtitan) is not installed")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _by_step(records: list[dict[str, Any]]) -> dict[int, dict[int, dict[str, Any]]]:
    steps: dict[int, dict[int, dict[str, Any]]] = {}
    for r in records:
        assert r["rank"] not in steps.setdefault(r["step"], {}), f"duplicate record {r}"
        steps[r["step"]][r["rank"]] = r
    return steps


def test_debug_model_trains_on_2x1_reports_every_rank_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cookbook.torchtitan.spmd_train import LossCollector, train
    from monarch.actor import this_host, this_proc

    # Procs inherit the controller's environment: the launcher builds its assets here.
    monkeypatch.setenv("MONARCH_TITAN_ASSETS", str(tmp_path / "assets"))
    dump = tmp_path / "run"
    common = ["--dump_folder", str(dump), "--checkpoint.enable", "--checkpoint.interval", "2"]
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    collector = this_proc().spawn("loss_collector", LossCollector, True)
    try:
        train(procs, ["--training.steps", "2", *common], collector)
        first_run = collector.records.call_one().get()
        train(procs, ["--training.steps", "3", *common], collector)
        records = collector.records.call_one().get()
    finally:
        procs.stop().get()

    assert sorted((r["step"], r["rank"]) for r in first_run) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert (dump / "checkpoint" / "step-2").is_dir()
    # The second run resumed: its only step is 3, and no step was trained twice.
    steps = _by_step(records)
    assert sorted(steps) == [1, 2, 3]
    for step, ranks in steps.items():
        assert sorted(ranks) == [0, 1], f"step {step} missing a rank: {ranks}"
        for r in ranks.values():
            assert math.isfinite(r["loss"]) and math.isfinite(r["global_avg_loss"]), r
            assert r["rss_peak_gib"] > 0 and r["step_s"] > 0, r
        # Each rank's own loss averages to torchtitan's global loss (equal token counts).
        mean = sum(r["loss"] for r in ranks.values()) / 2
        assert mean == pytest.approx(ranks[0]["global_avg_loss"], rel=1e-4)
    # The curve continues from the checkpoint rather than restarting from a fresh model.
    assert steps[3][0]["global_avg_loss"] < steps[1][0]["global_avg_loss"] - 0.3


def test_sigkilled_rank_restarts_from_checkpoint_and_the_curve_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cookbook.torchtitan import fault_tolerance

    monkeypatch.setenv("MONARCH_TITAN_ASSETS", str(tmp_path / "assets"))
    # Small shapes keep the two generations short; checkpoint at step 2, kill after step 3.
    out = fault_tolerance.main([
        "--steps", "4", "--kill-at-step", "3", "--kill-rank", "1",
        "--checkpoint-interval", "2", "--dump-folder", str(tmp_path / "run"),
        "--training.seq_len", "128", "--training.local_batch_size", "2",
    ])
    assert out["generations"] == 2 and out["failures"], out
    assert out["resumed_at_step"] == 3 and out["recovery_s"] > 0
    records = out["records"]
    assert all(math.isfinite(r["loss"]) for r in records)
    first_pids = {r["pid"] for r in records if r["step"] == 1}
    assert out["killed"]["pid"] in first_pids
    first = {(r["rank"], r["step"]): r for r in records if r["pid"] in first_pids}
    second = {(r["rank"], r["step"]): r for r in records if r["pid"] not in first_pids}
    assert {(1, 1), (1, 2), (1, 3)} <= set(first)
    # The new generation resumed after the step-2 checkpoint and reached the target.
    assert sorted(second) == [(0, 3), (0, 4), (1, 3), (1, 4)]
    # Same model, optimizer and data position: the repeated step 3 has the same losses.
    for rank in (0, 1):
        if (rank, 3) in first:
            assert second[rank, 3]["loss"] == pytest.approx(first[rank, 3]["loss"], rel=1e-4)
    assert second[1, 3]["global_avg_loss"] == pytest.approx(
        first[1, 3]["global_avg_loss"], rel=1e-4)


def test_monarch_apply_and_exec_train_on_two_hosts_2x2(tmp_path: Path) -> None:
    """`monarch apply jobs.py:job_2x2` + `monarch exec --per-host gpus=2 -- python
    cpu_launch.py`: four ranks over two local hosts, each rank's step lines at the controller."""
    import os
    import subprocess
    import sys

    from cookbook.torchtitan import step_reports

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "MONARCH_TITAN_ASSETS": str(tmp_path / "assets"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    monarch = [sys.executable, "-m", "monarch.tools.cli"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*monarch, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=150, check=False)

    applied = run("apply", f"{root}/cookbook/torchtitan/jobs.py:job_2x2")
    assert applied.returncode == 0, applied.stderr[-2000:]
    try:
        done = run("exec", "--per-host", "gpus=2", "--", sys.executable,
                   str(root / "cookbook" / "torchtitan" / "cpu_launch.py"),
                   "--training.steps", "2", "--training.seq_len", "128",
                   "--training.local_batch_size", "2", "--dump_folder", str(tmp_path / "run"))
    finally:
        run("kill")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    records = [r for line in done.stdout.splitlines()
               if (r := step_reports.parse_line(line)) is not None]
    steps = _by_step(records)
    assert sorted(steps) == [1, 2]
    for ranks in steps.values():
        assert sorted(ranks) == [0, 1, 2, 3]
        assert all(math.isfinite(r["loss"]) for r in ranks.values())
        mean = sum(r["loss"] for r in ranks.values()) / 4
        assert mean == pytest.approx(ranks[0]["global_avg_loss"], rel=1e-4)


def test_spmd_2x2_ships_code_and_venv_with_remote_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spmd_train's 2x2 job with `--remote-mount`: the cookbook and the venv reach the two
    hosts through `job.remote_mount`; the procs run the mounted interpreter, import torch from
    the mount, and train."""
    from monarch._src.mount.fs import fuse_unavailable_reason

    reason = fuse_unavailable_reason()
    if reason is not None:
        pytest.skip(f"FUSE is unavailable here ({reason}); use sync_workspace instead")
    from cookbook.torchtitan.spmd_train import LossCollector, make_procs, train
    from monarch.actor import Actor, endpoint, this_proc

    class Where(Actor):
        @endpoint
        def where(self) -> tuple[str, str]:
            import sys

            import torch

            return sys.executable, torch.__file__

    monkeypatch.setenv("MONARCH_TITAN_ASSETS", str(tmp_path / "assets"))
    mount = str(tmp_path / "mnt")
    procs, job, launcher = make_procs("2x2", mount)
    try:
        assert launcher == f"{mount}/cookbook/torchtitan/cpu_launch.py"
        seen = procs.spawn("where", Where).where.call().get()
        for exe, torch_file in (v for _, v in seen.items()):
            assert exe.startswith(f"{mount}/venv/") and torch_file.startswith(f"{mount}/venv/")
        collector = this_proc().spawn("loss_collector", LossCollector, True)
        train(procs, ["--training.steps", "2", "--training.seq_len", "128",
                      "--training.local_batch_size", "2", "--dump_folder",
                      str(tmp_path / "run")], collector, launcher)
        records = collector.records.call_one().get()
    finally:
        procs.stop().get()
        job.kill()
    assert sorted(_by_step(records)) == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in records)
