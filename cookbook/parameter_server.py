"""A parameter server: four workers push gradients, one server averages them and updates weights.

Run: `.venv/bin/python cookbook/parameter_server.py`. The task is a tiny linear regression
(y = X w + noise, 3 features, 64 samples, seeded). The `ParameterServer` actor, on a proc of its
own, holds the weights as a torch tensor. Four `Worker` actors on a `{"workers": 4}` proc mesh
each rebuild the same seeded dataset and keep only their shard. In every round the client tells
all workers to `step`; each worker pulls the weights with `call_one`, computes the gradient of
the mean squared error on its shard, and pushes it to the server. The server applies one SGD step
with the average once all four gradients are in, summing them in rank order so that the result
does not depend on which worker finished first.
"""

from __future__ import annotations

from typing import Any

import torch

from monarch.actor import Actor, current_rank, current_size, endpoint, this_host

FEATURES = 3
SAMPLES = 64
TRUE_WEIGHTS = [2.0, -3.0, 0.5]
ROUNDS = 20
LR = 0.2


def dataset() -> tuple[torch.Tensor, torch.Tensor]:
    """The whole dataset, the same wherever it is built."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    y = x @ torch.tensor(TRUE_WEIGHTS) + 0.1 * torch.randn(SAMPLES, generator=gen)
    return x, y


class ParameterServer(Actor):
    def __init__(self, workers: int) -> None:
        torch.set_num_threads(1)  # tiny tensors: threads would only contend for the cores
        self.weights = torch.zeros(FEATURES)
        self.workers = workers
        self.pending: dict[int, torch.Tensor] = {}  # this round's gradients by worker rank
        self.version = 0  # updates applied so far

    @endpoint
    def pull(self) -> torch.Tensor:
        return self.weights

    @endpoint
    def push(self, rank: int, grad: torch.Tensor) -> None:
        self.pending[rank] = grad
        if len(self.pending) == self.workers:
            mean = torch.stack([self.pending[r] for r in range(self.workers)]).mean(dim=0)
            self.weights = self.weights - LR * mean
            self.pending.clear()
            self.version += 1

    @endpoint
    def updates(self) -> int:
        return self.version


class Worker(Actor):
    def __init__(self, server: Any) -> None:
        torch.set_num_threads(1)
        self.server = server  # the one-actor ParameterServer mesh
        self.rank = current_rank().rank  # at __init__, this actor's rank in its own mesh
        shards = current_size()["workers"]
        x, y = dataset()
        self.x, self.y = x.chunk(shards)[self.rank], y.chunk(shards)[self.rank]

    @endpoint
    def step(self) -> float:
        """Pull, compute this shard's gradient, push it; return the shard's loss before the step."""
        weights = self.server.pull.call_one().get().requires_grad_()
        loss = ((self.x @ weights - self.y) ** 2).mean()
        loss.backward()
        self.server.push.call_one(self.rank, weights.grad).get()
        return loss.item()


def main() -> None:
    torch.set_num_threads(1)
    server_procs = this_host().spawn_procs(name="server")
    worker_procs = this_host().spawn_procs(per_host={"workers": 4}, name="workers")
    server = server_procs.spawn("server", ParameterServer, 4)
    workers = worker_procs.spawn("workers", Worker, server)
    # Workers message the server only from `step`; by then its __init__ has run, since the client
    # waits for this call first. Meanwhile all five procs start (and import torch) at once.
    server.updates.call_one().get()

    losses = []
    for round_ in range(ROUNDS):
        shard_losses = workers.step.call().get()
        # Equal shards: the mean of the shard losses is the loss on the whole dataset.
        losses.append(sum(shard_losses.values()) / len(shard_losses))
        if round_ % 5 == 0 or round_ == ROUNDS - 1:
            print(f"round {round_:2d} loss {losses[-1]:.4f}")

    weights = server.pull.call_one().get()
    print("updates applied:", server.updates.call_one().get())
    print("loss decreased:", losses[-1] < losses[0])
    print("weights:", [round(w, 2) for w in weights.tolist()], "true:", TRUE_WEIGHTS)

    worker_procs.stop().get()
    server_procs.stop().get()
    print("stopped")


if __name__ == "__main__":
    main()
