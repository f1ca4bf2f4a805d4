"""GRPO on a small transformer: two generator actors sample, a trainer learns, and every step the
new weights move trainer -> generators one-sided through `RDMABuffer`s.

Run: `.venv/bin/python cookbook/rl_transformer.py [--steps N] [--sync rdma|endpoint]`. CPU only,
seeded; 20-60 s on 2 shared cores, depending on their load.

The policy is a decoder-only transformer built with `torch.nn` (4 layers, d_model 256, 4 heads, a
vocabulary of 256 tokens: 3.3 M parameters, 13 MB of float32). The task has a reward anyone can
check: the prompt is 8 random tokens below 128, and the policy writes 8 more; each written token
that is larger than the token before it earns 1/8. A random policy scores about 0.5, and the
reward climbs to about 0.85 within 50 steps.

Each step:

* both `Generator`s (one proc each) sample `GROUP` completions for each of their `PROMPTS`
  prompts with their copy of the policy (with a KV cache), score them, and return them;
* the `Trainer` (its own proc) computes group-relative advantages (reward minus the mean of the
  prompt's group, over its standard deviation), takes one policy-gradient step with Adam, and
  publishes the new weights;
* the generators pull the weights (`--sync rdma`), or the trainer sends them its `state_dict()`
  through an endpoint call (`--sync endpoint`), the baseline `benchmarks/rl_weight_sync.py` times
  it against.

Publishing without tearing. The trainer's parameters are views into one flat float32 tensor, so
the optimizer updates it in place. It registers, once, two *slots* (each a copy of the flat
weights, each an `RDMABuffer`) and a small table of the version each slot holds (a third buffer).
To publish version `v` it marks slot `v % 2` as being written, copies the weights in, then writes
`v` into the table. A generator reads the table, reads the newest slot straight into its own
parameters, and reads the table again: if that slot's entry changed in between (the trainer
started rewriting it), the read may be torn and it reads again (a seqlock). Two slots mean the
trainer can publish `v + 1` while a generator is still reading `v`. This loop is synchronous (the
controller waits for the sync before the next generation), so retries never happen here; the
protocol is what makes it safe to let the trainer run ahead.
"""

from __future__ import annotations

import argparse
import hashlib
import time
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from monarch.actor import Actor, current_rank, endpoint, this_host
from monarch.rdma import RDMABuffer, RDMATcpFallbackWarning

VOCAB = 256
D_MODEL = 256
LAYERS = 4
HEADS = 4
PROMPT_LEN = 8
COMPLETION_LEN = 8
PROMPT_MAX = VOCAB // 2  # prompt tokens are below this, so a larger token is always possible
PROMPTS = 2  # prompts per generator per step
GROUP = 8  # completions per prompt
LR = 2e-3
SEED = 0
STEPS = 50

WRITING = -2  # a slot's version while the trainer rewrites it
EMPTY = -1  # a slot never written


class Block(nn.Module):
    """Pre-norm attention and MLP; takes and returns a (keys, values) cache for sampling."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.mlp = nn.Sequential(
            nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL)
        )

    def forward(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, _ = x.shape
        q, k, v = (
            z.view(b, t, HEADS, D_MODEL // HEADS).transpose(1, 2)
            for z in self.qkv(self.ln1(x)).split(D_MODEL, dim=-1)
        )
        if cache is not None:  # one new position attends to every earlier one
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, D_MODEL))
        return x + self.mlp(self.ln2(x)), (k, v)


class Policy(nn.Module):
    """A decoder-only transformer over `VOCAB` tokens, sequences up to prompt + completion."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, D_MODEL)
        self.positions = nn.Embedding(PROMPT_LEN + COMPLETION_LEN, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(
        self, ids: torch.Tensor, caches: list[Any] | None = None, start: int = 0
    ) -> tuple[torch.Tensor, list[Any]]:
        """Logits for `ids` (positions `start`...), and the caches to continue from."""
        pos = torch.arange(start, start + ids.shape[1])
        x = self.tokens(ids) + self.positions(pos)
        new = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if caches is None else caches[i])
            new.append(kv)
        return self.head(self.ln(x)), new


def flat_policy() -> tuple[Policy, torch.Tensor]:
    """The seeded initial policy, its parameters re-pointed into one flat float32 tensor.

    In-place updates (the optimizer's, `load_state_dict`'s, an RDMA read's) of either the
    parameters or the flat tensor show in the other, so the weights are one registrable region.
    """
    torch.manual_seed(SEED)
    policy = Policy()
    params = list(policy.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        p.data = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return policy, flat


def reward(prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
    """Per sequence: the fraction of completion tokens larger than the token before them."""
    before = torch.cat([prompts[:, -1:], completions[:, :-1]], dim=1)
    return (completions > before).float().mean(dim=1)


@torch.no_grad()
def sample(policy: Policy, prompts: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
    """`COMPLETION_LEN` tokens per prompt row, sampled at temperature 1 with a KV cache."""
    logits, caches = policy(prompts)
    out = []
    for i in range(COMPLETION_LEN):
        token = torch.multinomial(torch.softmax(logits[:, -1], dim=-1), 1, generator=rng)
        out.append(token)
        if i + 1 < COMPLETION_LEN:
            logits, caches = policy(token, caches, start=PROMPT_LEN + i)
    return torch.cat(out, dim=1)


def digest(flat: torch.Tensor) -> str:
    """SHA-256 of the weights' bytes: equal digests mean bitwise-equal weights."""
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


class Trainer(Actor):
    """Owns the policy and the optimizer; publishes each new version of the weights."""

    def __init__(self, generators: Any) -> None:
        warnings.simplefilter("ignore", RDMATcpFallbackWarning)
        torch.set_num_threads(1)  # two cores shared by three procs: threads would only contend
        self.generators = generators
        self.policy, self.flat = flat_policy()
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=LR)
        self.version = 0  # optimizer steps taken
        self.slots = torch.empty(0)  # two copies of `flat`, once registered
        self.versions = torch.full((2,), EMPTY, dtype=torch.int64)
        self.buffers: tuple[RDMABuffer, list[RDMABuffer]] | None = None

    @endpoint
    def weight_buffers(self) -> tuple[RDMABuffer, list[RDMABuffer]]:
        """Register the version table and the two slots (once); publish the current weights."""
        if self.buffers is None:
            self.slots = torch.zeros(2, self.flat.numel())
            table = RDMABuffer(self.versions.view(torch.uint8))
            slots = [RDMABuffer(slot.view(torch.uint8)) for slot in self.slots]
            self.buffers = (table, slots)
            self._publish()
        return self.buffers

    def _publish(self) -> None:
        slot = self.version % 2
        self.versions[slot] = WRITING  # readers of this slot from now on retry
        self.slots[slot].copy_(self.flat)
        self.versions[slot] = self.version  # only now is the slot whole

    @endpoint
    def send_state_dict(self) -> int:
        """The baseline sync: send `state_dict()` to every generator in an endpoint call."""
        self.generators.load_state_dict.call(self.policy.state_dict(), self.version).get()
        return self.version

    @endpoint
    def train(self, batches: list[dict[str, Any]]) -> dict[str, float]:
        """One policy-gradient step on every generator's groups; publish if registered."""
        prompts = torch.cat([b["prompts"] for b in batches])
        completions = torch.cat([b["completions"] for b in batches])
        rewards = torch.cat([b["rewards"] for b in batches])
        if any(b["version"] != self.version for b in batches):
            raise RuntimeError(
                f"Trainer at version {self.version} got samples from versions "
                f"{[b['version'] for b in batches]}; this loop is on-policy: sync the generators "
                "after every step."
            )
        groups = rewards.view(-1, GROUP)
        advantages = (groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-6)
        ids = torch.cat([prompts, completions], dim=1)
        logits, _ = self.policy(ids[:, :-1])
        logprobs = torch.log_softmax(logits[:, PROMPT_LEN - 1:], dim=-1)
        taken = logprobs.gather(-1, completions.unsqueeze(-1)).squeeze(-1)
        loss = -(advantages.reshape(-1, 1) * taken).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()  # in place: the flat tensor now holds the new weights
        self.version += 1
        t0 = time.perf_counter()
        if self.buffers is not None:
            self._publish()
        return {"loss": loss.item(), "reward": rewards.mean().item(), "version": self.version,
                "publish_s": time.perf_counter() - t0}

    @endpoint
    def digest(self) -> tuple[int, str]:
        return self.version, digest(self.flat)


class Generator(Actor):
    """Samples groups of completions with its own copy of the policy."""

    def __init__(self) -> None:
        warnings.simplefilter("ignore", RDMATcpFallbackWarning)
        torch.set_num_threads(1)
        self.policy, self.flat = flat_policy()
        self.version: int | None = None  # the version `flat` holds; None: not synced, or torn
        self.rank = current_rank().rank  # its place in its mesh: seeds its own prompts
        self.remote: tuple[RDMABuffer, list[RDMABuffer]] | None = None
        self.table = torch.empty(2, dtype=torch.int64)
        self.torn_reads = 0  # reads thrown away because the slot was rewritten meanwhile

    @endpoint
    def connect(self, buffers: tuple[RDMABuffer, list[RDMABuffer]]) -> None:
        self.remote = buffers

    @endpoint
    def sync(self, at_least: int, timeout: float = 30.0) -> int:
        """Pull the newest whole version (>= `at_least`) of the weights; return its number."""
        return self._sync(at_least, timeout)

    def _sync(self, at_least: int, timeout: float) -> int:
        if self.remote is None:
            raise RuntimeError("Generator.sync: no weight buffers; call connect() first.")
        table, slots = self.remote
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            table.read_into(self.table.view(torch.uint8)).get()
            slot = int(self.table.argmax())
            version = int(self.table[slot])
            if version < at_least:
                time.sleep(0.001)  # not published yet, or being rewritten: look again soon
                continue
            slots[slot].read_into(self.flat.view(torch.uint8)).get()
            table.read_into(self.table.view(torch.uint8)).get()
            if int(self.table[slot]) == version:  # not rewritten while we read: whole
                self.version = version
                return version
            self.version = None  # torn: `flat` mixes two versions until a whole read
            self.torn_reads += 1
        raise TimeoutError(
            f"Generator {self.rank}: no whole copy of weights version >= {at_least} within "
            f"{timeout} s (the trainer's slots held {self.table.tolist()})."
        )

    @endpoint
    def load_state_dict(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.policy.load_state_dict(state)  # copies into the parameters, so into `flat`
        self.version = version

    @endpoint
    def generate(self, step: int) -> dict[str, Any]:
        """`GROUP` scored completions for each of `PROMPTS` fresh prompts."""
        if self.version is None:
            raise RuntimeError(f"Generator {self.rank}: weights not synced; sync() first.")
        rng = torch.Generator().manual_seed(SEED * 1_000_003 + step * 1_009 + self.rank)
        prompts = torch.randint(0, PROMPT_MAX, (PROMPTS, PROMPT_LEN), generator=rng)
        rows = prompts.repeat_interleave(GROUP, dim=0)
        completions = sample(self.policy, rows, rng)
        return {"prompts": rows, "completions": completions,
                "rewards": reward(rows, completions), "version": self.version}

    @endpoint
    def digest(self) -> tuple[int | None, str]:
        return self.version, digest(self.flat)


class RLRun:
    """The controller's side: procs, actors, and one GRPO step at a time with either sync."""

    def __init__(self, sync: str, name: str = "rl") -> None:
        if sync not in ("rdma", "endpoint"):
            raise ValueError(f"RLRun: sync={sync!r}; choose 'rdma' or 'endpoint'.")
        self.sync_method = sync
        self.generator_procs = this_host().spawn_procs(per_host={"generators": 2})
        self.trainer_procs = this_host().spawn_procs(per_host={"trainer": 1})
        self.generators = self.generator_procs.spawn(f"{name}-generator", Generator)
        self.trainer = self.trainer_procs.spawn(f"{name}-trainer", Trainer, self.generators)
        if sync == "rdma":
            self.generators.connect.call(self.trainer.weight_buffers.call_one().get()).get()
            self.generators.sync.call(0).get()
        else:
            self.trainer.send_state_dict.call_one().get()

    def step(self, step: int) -> dict[str, float]:
        """Generate, train, sync; the trainer's figures plus the phases' seconds."""
        t0 = time.perf_counter()
        batches = list(self.generators.generate.call(step).get().values())
        t1 = time.perf_counter()
        stats = self.trainer.train.call_one(batches).get()
        t2 = time.perf_counter()
        if self.sync_method == "rdma":
            versions = self.generators.sync.call(int(stats["version"])).get().values()
        else:
            versions = [self.trainer.send_state_dict.call_one().get()] * 2
        t3 = time.perf_counter()
        if list(versions) != [stats["version"]] * 2:
            raise RuntimeError(f"generators synced to {list(versions)}, not {stats['version']}")
        return {**stats, "generate_s": t1 - t0, "train_s": t2 - t1, "sync_s": t3 - t2,
                "step_s": t3 - t0}

    def weights_match(self) -> bool:
        """Whether both generators hold bitwise the trainer's weights, of the same version."""
        trainer, generators = self.trainer.digest.call_one(), self.generators.digest.call()
        expected = trainer.get()  # the three hashes run at once, one per proc
        return all(g == expected for g in generators.get().values())

    def stop(self) -> None:
        self.generator_procs.stop().get()
        self.trainer_procs.stop().get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--sync", choices=("rdma", "endpoint"), default="rdma")
    args = parser.parse_args()
    warnings.simplefilter("ignore", RDMATcpFallbackWarning)
    torch.set_num_threads(1)
    params = sum(p.numel() for p in Policy().parameters())
    print(f"policy: {params} parameters, {params * 4} bytes; sync: {args.sync}")
    run = RLRun(args.sync)
    rewards, match = [], run.weights_match()
    for step in range(args.steps):
        stats = run.step(step)
        match = match and run.weights_match()
        rewards.append(stats["reward"])
        print(f"step {step:2d} reward {stats['reward']:.3f} loss {stats['loss']:+.4f} "
              f"sync {stats['sync_s'] * 1e3:.1f} ms")
    fifth = max(1, args.steps // 5)
    first, last = sum(rewards[:fifth]) / fifth, sum(rewards[-fifth:]) / fifth
    print(f"mean reward, first {fifth} steps: {first:.3f}")
    print(f"mean reward, last {fifth} steps: {last:.3f}")
    print(f"improved: {last > first}")
    print(f"generators held the trainer's weights bitwise after every sync: {match}")
    run.stop()
    print("stopped")


if __name__ == "__main__":
    main()
