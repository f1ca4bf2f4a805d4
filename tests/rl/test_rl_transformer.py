"""The GRPO loop of `cookbook/rl_transformer.py` on real procs: it trains with finite losses, and
after every sync both generators hold the trainer's weights bitwise, whether the weights were
pulled through `RDMABuffer`s or sent as a `state_dict()` in an endpoint call; a slot the trainer
is rewriting is never read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the RL recipe trains a torch model")

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"
STEPS = 3

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture(scope="module")
def rl() -> Iterator[Any]:
    """The recipe as a module; its folder stays on sys.path, which the procs inherit."""
    sys.path.insert(0, str(COOKBOOK))
    try:
        import rl_transformer

        yield rl_transformer
    finally:
        sys.path.remove(str(COOKBOOK))


def _train(rl: Any, sync: str) -> list[dict[str, float]]:
    run = rl.RLRun(sync, name=f"test-{sync}")
    try:
        assert run.weights_match()  # the initial sync, before any step
        history = []
        for step in range(STEPS):
            stats = run.step(step)
            assert stats["version"] == step + 1
            assert math.isfinite(stats["loss"]) and 0.0 <= stats["reward"] <= 1.0
            assert run.weights_match(), f"{sync}: generators differ from the trainer at {step}"
            history.append(stats)
        return history
    finally:
        run.stop()


def test_both_syncs_deliver_the_trainers_weights_bitwise(rl: Any) -> None:
    rdma = _train(rl, "rdma")
    endpoint = _train(rl, "endpoint")
    # Seeded sampling on bitwise-equal weights: the two runs are the same run.
    keys = ("loss", "reward")
    assert [[s[k] for k in keys] for s in rdma] == [[s[k] for k in keys] for s in endpoint]
    assert all(s["publish_s"] >= 0 for s in rdma)


def test_a_slot_being_rewritten_is_never_read(rl: Any) -> None:
    run = rl.RLRun("rdma", name="test-seqlock")
    try:
        table, _ = run.trainer.weight_buffers.call_one().get()  # registered once: same table
        version0 = run.trainer.digest.call_one().get()
        run.step(0)  # version 0 stays in slot 0, version 1 is in slot 1
        # Mark slot 1 as being rewritten, as the trainer does while it publishes version 3.
        table.write_from(torch.tensor([0, rl.WRITING]).view(torch.uint8)).get()
        assert run.generators.sync.call(0).get().values() == [0, 0]  # the whole older slot
        assert set(run.generators.digest.call().get().values()) == {version0}
        with pytest.raises(Exception, match="no whole copy of weights version >= 1"):
            run.generators.sync.call(1, 0.5).get()
        table.write_from(torch.tensor([0, 1]).view(torch.uint8)).get()  # published again
        assert run.generators.sync.call(1).get().values() == [1, 1]
        assert run.weights_match()
    finally:
        run.stop()


def test_reads_racing_a_publishing_trainer_are_never_torn() -> None:
    """The trainer republishes as fast as it can (every version's weights all equal to the
    version number) while a generator syncs as fast as it can: every copy it keeps is whole."""
    from monarch.actor import this_host
    from tests.rl.actors import CheckingGenerator, ChurningTrainer

    procs = this_host().spawn_procs(per_host={"generators": 2})  # proc 1 hosts the trainer
    try:
        generator = procs.slice(generators=0).spawn("checking-generator", CheckingGenerator)
        trainer = procs.slice(generators=1).spawn("churning-trainer", ChurningTrainer, generator)
        generator.connect.call(trainer.weight_buffers.call_one().get()).get()
        # A read before the trainer churns gets version 0 (a race the churn below loses when
        # the machine is loaded): it must follow the rule as well.
        assert generator.sync_many.call_one(1).get() == ([(0, 0.0, 0.0)], 0)
        churn = trainer.churn.call_one(300)
        reads, torn = generator.sync_many.call_one(300).get()
        last = churn.get()
    finally:
        procs.stop().get()
    assert last == 300
    versions = [version for version, _, _ in reads]
    assert versions == sorted(versions) and versions[-1] > 0  # it saw the trainer move
    assert all(low == high == version for version, low, high in reads), "a torn copy was kept"
    print(f"reads thrown away as torn: {torn} of {len(reads) + torn}")


def test_the_recipe_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(COOKBOOK / "rl_transformer.py"), "--steps", str(STEPS)],
        capture_output=True, text=True, timeout=100, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert lines["policy"] == "3294976 parameters, 13179904 bytes; sync: rdma"
    assert lines["generators held the trainer's weights bitwise after every sync"] == "True"
    assert sum(line.startswith("step ") for line in done.stdout.splitlines()) == STEPS
    assert done.stdout.endswith("stopped\n")


def test_the_benchmark_reports_both_syncs() -> None:
    bench = COOKBOOK.parent / "benchmarks" / "rl_weight_sync.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--steps", "2", "--warmup", "0", "--rounds", "1"],
        capture_output=True, text=True, timeout=100, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["model"] == {"parameters": 3294976, "bytes": 13179904, "layers": 4,
                               "d_model": 256, "vocab": 256}
    for method in ("rdma", "endpoint"):
        figures = report[method]
        assert figures["steps"] == 2 and figures["weights_match"] is True
        assert 0 < figures["sync_p50_ms"] <= figures["sync_p90_ms"] <= figures["step_p50_ms"] * 2
        assert isinstance(figures["rounds"][0]["load_avg_1m_before"], float)
    assert report["same_trajectory"] is True
    assert report["ratios"]["sync_p50_endpoint_over_rdma"] > 0
    assert len(report["commit"]) == 40
