"""A parameter server whose workers pull weights, and whose gradients are pulled, through RDMA.

Run: `.venv/bin/python cookbook/rdma_parameter_server.py`. The task is a seeded linear regression
(8 features, 256 samples). The `ParameterServer` holds the weights in one float32 tensor and
publishes it once as an `RDMABuffer`; the four `Worker`s each publish their gradient tensor the
same way. After that, no tensor travels in a message: every round each worker *pulls* the current
weights with `read_into` (one-sided: the server's endpoints do not run), computes the gradient of
its shard into its own gradient tensor, and the server *pulls* all four gradients at once with one
`RDMAAction`, into disjoint slices of a single tensor, then applies an SGD step in place (so the
published buffer keeps pointing at the live weights). Messages carry only small handles and
"go" signals: the control plane. The bytes move on the data plane.
"""

from __future__ import annotations

import warnings

import torch

from monarch.actor import Actor, current_rank, current_size, endpoint, this_host
from monarch.rdma import RDMAAction, RDMABuffer, RDMATcpFallbackWarning

FEATURES = 8
SAMPLES = 256
ROUNDS = 30
LR = 0.3
WORKERS = 4


def dataset() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, targets, true weights): the same wherever it is built."""
    gen = torch.Generator().manual_seed(0)
    true_w = torch.linspace(-2.0, 2.0, FEATURES)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    y = x @ true_w + 0.05 * torch.randn(SAMPLES, generator=gen)
    return x, y, true_w


class ParameterServer(Actor):
    """Owns the weights; gathers gradients one-sided and applies them."""

    def __init__(self) -> None:
        warnings.simplefilter("ignore", RDMATcpFallbackWarning)
        self.weights = torch.zeros(FEATURES)
        self.grads = torch.zeros(WORKERS * FEATURES)  # worker r's gradient lands in slice r
        self.gather: RDMAAction | None = None
        self.updates = 0

    @endpoint
    def weights_buffer(self) -> RDMABuffer:
        self.published = RDMABuffer(self.weights.view(torch.uint8))
        return self.published

    @endpoint
    def connect(self, grad_buffers: list[RDMABuffer]) -> None:
        """Build, once, the action that pulls every worker's gradient into its slice."""
        action = RDMAAction()
        for r, buf in enumerate(grad_buffers):
            action.read_remote(self.grads[r * FEATURES:(r + 1) * FEATURES].view(torch.uint8), buf)
        self.gather = action

    @endpoint
    def apply(self) -> None:
        assert self.gather is not None, "connect() first"
        self.gather.submit().get()  # re-submitting picks up this round's gradients
        mean = self.grads.view(WORKERS, FEATURES).sum(0) / WORKERS  # rank order: deterministic
        self.weights.sub_(LR * mean)  # in place: the published buffer stays valid
        self.updates += 1

    @endpoint
    def final(self) -> tuple[list[float], int]:
        self.published.drop().get()
        return [round(v, 2) for v in self.weights.tolist()], self.updates


class Worker(Actor):
    """Pulls the weights, computes its shard's gradient into its published gradient tensor."""

    def __init__(self) -> None:
        warnings.simplefilter("ignore", RDMATcpFallbackWarning)
        torch.set_num_threads(1)
        x, y, _ = dataset()
        rank, size = current_rank()["workers"], current_size()["workers"]
        self.x, self.y = x[rank::size], y[rank::size]
        self.weights = torch.zeros(FEATURES)
        self.grad = torch.zeros(FEATURES)

    @endpoint
    def connect(self, weights: RDMABuffer) -> RDMABuffer:
        self.remote_weights = weights
        self.grad_buffer = RDMABuffer(self.grad.view(torch.uint8))
        return self.grad_buffer

    @endpoint
    def step(self) -> float:
        self.remote_weights.read_into(self.weights.view(torch.uint8)).get()
        err = self.x @ self.weights - self.y
        self.grad.copy_(2 * self.x.T @ err / len(self.y))  # in place, under the published buffer
        return float((err**2).mean())


def main() -> None:
    warnings.simplefilter("ignore", RDMATcpFallbackWarning)
    server_proc = this_host().spawn_procs(per_host={"server": 1})
    worker_procs = this_host().spawn_procs(per_host={"workers": WORKERS})
    server = server_proc.spawn("server", ParameterServer)
    workers = worker_procs.spawn("workers", Worker)

    weights = server.weights_buffer.call_one().get()
    print(f"weights buffer: {weights.size()} bytes, reached by {weights.backend}")
    grad_buffers = list(workers.connect.call(weights).get().values())  # in rank order
    server.connect.call_one(grad_buffers).get()

    first = last = 0.0
    for i in range(ROUNDS):
        losses = workers.step.call().get()
        loss = sum(losses.values()) / WORKERS
        first = loss if i == 0 else first
        last = loss
        if i % 10 == 0:
            print(f"round {i:2d} loss {loss:.4f}")
        server.apply.call_one().get()

    final, updates = server.final.call_one().get()
    _, _, true_w = dataset()
    print(f"updates applied: {updates}")
    print(f"loss decreased: {last < first / 100}")
    print(f"weights: {final}")
    print(f"true: {[round(v, 2) for v in true_w.tolist()]}")
    worker_procs.stop().get()
    server_proc.stop().get()
    print("stopped")


if __name__ == "__main__":
    main()
