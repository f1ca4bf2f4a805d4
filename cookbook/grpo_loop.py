"""A tiny GRPO-style reinforcement-learning loop: generator, replay buffer and learner actors.

Run: `.venv/bin/python cookbook/grpo_loop.py`. CPU only, seeded, a few seconds.

The policy is one linear layer from a one-hot prompt (4 prompts) to logits over 8 tokens; a
"completion" is one sampled token, and the reward function pays 1 for token 5 and 0 otherwise.
Each step:

* the `Generator` (own proc) samples a group of completions for one prompt with its copy of the
  policy, scores them, and adds the group to the `ReplayBuffer`;
* the `Learner` takes the oldest group from the buffer, computes group-relative advantages
  (reward minus the group mean, over the group's standard deviation), takes one policy-gradient
  step, and sends the new weights to the generator through its `load_weights` endpoint.

The buffer and the learner are two actors on one proc (`trainer`); the generator has a proc of its
own. The client only drives the steps and reads the learner's metrics.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch

from monarch.actor import Actor, endpoint, this_host

PROMPTS = 4
TOKENS = 8
REWARDED_TOKEN = 5
GROUP = 8
STEPS = 30
LR = 0.1


def reward(token: int) -> float:
    return 1.0 if token == REWARDED_TOKEN else 0.0


def make_policy() -> torch.nn.Linear:
    torch.manual_seed(0)  # the same initial policy wherever it is built
    return torch.nn.Linear(PROMPTS, TOKENS)


def prompt_features(prompts: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(prompts, PROMPTS).float()


class Generator(Actor):
    def __init__(self, buffer: Any) -> None:
        torch.set_num_threads(1)  # tiny tensors: threads would only contend for the cores
        self.buffer = buffer  # the ReplayBuffer mesh (one actor)
        self.policy = make_policy()
        self.version = 0  # the learner step whose weights `policy` holds
        self.rng = torch.Generator().manual_seed(1)

    @endpoint
    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.policy.load_state_dict(state)
        self.version = version

    @endpoint
    def policy_version(self) -> int:
        return self.version

    @endpoint
    def generate(self, step: int) -> int:
        """Sample a group for prompt `step % PROMPTS`, store it; return the policy version."""
        prompt = torch.tensor(step % PROMPTS)
        with torch.no_grad():
            probs = torch.softmax(self.policy(prompt_features(prompt)), dim=-1)
        tokens = torch.multinomial(probs, GROUP, replacement=True, generator=self.rng)
        rewards = torch.tensor([reward(int(t)) for t in tokens])
        self.buffer.add.call_one(
            {"prompt": prompt, "tokens": tokens, "rewards": rewards, "version": self.version}
        ).get()
        return self.version


class ReplayBuffer(Actor):
    def __init__(self) -> None:
        self.groups: deque[dict[str, Any]] = deque()  # oldest first

    @endpoint
    def add(self, group: dict[str, Any]) -> None:
        self.groups.append(group)

    @endpoint
    def take(self) -> dict[str, Any]:
        return self.groups.popleft()

    @endpoint
    def groups_stored(self) -> int:
        return len(self.groups)


class Learner(Actor):
    def __init__(self, buffer: Any, generator: Any) -> None:
        torch.set_num_threads(1)
        self.buffer = buffer
        self.generator = generator
        self.policy = make_policy()
        self.optimizer = torch.optim.SGD(self.policy.parameters(), lr=LR)
        self.version = 0  # optimizer steps taken

    @endpoint
    def rewarded_prob(self) -> float:
        """P(rewarded token) under the current policy, averaged over the prompts."""
        with torch.no_grad():
            probs = torch.softmax(self.policy(prompt_features(torch.arange(PROMPTS))), dim=-1)
        return probs[:, REWARDED_TOKEN].mean().item()

    def _publish(self) -> None:
        state = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}
        self.generator.load_weights.call_one(state, self.version).get()

    @endpoint
    def publish(self) -> None:
        """Send the current weights to the generator."""
        self._publish()

    @endpoint
    def step(self) -> float:
        """Train on the oldest group, publish the new weights; return the group's mean reward."""
        group = self.buffer.take.call_one().get()
        rewards = group["rewards"]
        # Group-relative advantage: no value network, the group's own mean is the baseline.
        advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
        logits = self.policy(prompt_features(group["prompt"]))
        logprobs = torch.log_softmax(logits, dim=-1)[group["tokens"]]
        loss = -(advantages * logprobs).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.version += 1
        self._publish()
        return rewards.mean().item()


def main() -> None:
    torch.set_num_threads(1)
    generator_procs = this_host().spawn_procs(name="generator")
    trainer_procs = this_host().spawn_procs(name="trainer")
    buffer = trainer_procs.spawn("buffer", ReplayBuffer)
    generator = generator_procs.spawn("generator", Generator, buffer)
    learner = trainer_procs.spawn("learner", Learner, buffer, generator)
    # Generator and learner message other meshes only from endpoints, and these three calls
    # come first: every __init__ has run before any actor-to-actor message.
    buffer.groups_stored.call_one().get()
    generator.policy_version.call_one().get()
    before = learner.rewarded_prob.call_one().get()
    learner.publish.call_one().get()

    rewards, versions = [], []
    for step in range(STEPS):
        versions.append(generator.generate.call_one(step).get())
        rewards.append(learner.step.call_one().get())
    after = learner.rewarded_prob.call_one().get()

    third = STEPS // 3
    print(f"mean reward, first {third} steps: {sum(rewards[:third]) / third:.2f}")
    print(f"mean reward, last {third} steps: {sum(rewards[-third:]) / third:.2f}")
    print(f"P(rewarded token) before: {before:.2f}")
    print(f"P(rewarded token) after: {after:.2f}")
    print("improved:", after > before)
    print("generator always sampled with the latest weights:", versions == list(range(STEPS)))

    generator_procs.stop().get()
    trainer_procs.stop().get()
    print("stopped")


if __name__ == "__main__":
    main()
