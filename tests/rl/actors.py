"""Test-only subclasses of the RL recipe's actors (importable by the procs): a trainer that
republishes without pause, and a generator that syncs without pause and reports what it got."""

from __future__ import annotations

import sys
from pathlib import Path

from monarch.actor import endpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cookbook"))

import rl_transformer as rl


class ChurningTrainer(rl.Trainer):
    def __init__(self, generators: object) -> None:
        super().__init__(generators)
        # Version 0 (published when the buffers are registered) follows the rule too: a read
        # that lands before the first churn holds zeros, not the policy's initial weights.
        self.flat.fill_(0.0)

    @endpoint
    def churn(self, versions: int) -> int:
        """Publish `versions` new versions, version v's weights all equal to float(v)."""
        for _ in range(versions):
            self.version += 1
            self.flat.fill_(float(self.version))
            self._publish()
        return self.version


class CheckingGenerator(rl.Generator):
    @endpoint
    def sync_many(self, reads: int) -> tuple[list[tuple[int, float, float]], int]:
        """Sync `reads` times: (version, min, max of the weights) after each, and the number of
        torn reads thrown away meanwhile."""
        out = []
        for _ in range(reads):
            version = self._sync(0, 30.0)
            out.append((version, float(self.flat.min()), float(self.flat.max())))
        return out, self.torn_reads
