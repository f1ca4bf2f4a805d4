"""A plain torchrun-style DDP training script: no monarch in it.

Reads its identity from the torchrun environment, trains a tiny linear model with gloo for a few
steps and writes its final loss to `<out_dir>/loss_<RANK>.txt`. With `--crash-rank R`, rank R
ends its process abruptly after training (as a segfault would).
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--crash-rank", type=int, default=-1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)
    loss = torch.zeros(())
    for _ in range(args.steps):
        x = torch.randn(8, 4, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    # The global loss: every rank must agree on it.
    total = loss.detach().clone()
    dist.all_reduce(total)
    total /= world
    weights = model.module.weight.detach().flatten().tolist()
    print(f"rank {rank}/{world} local_rank {os.environ['LOCAL_RANK']} loss {total.item():.6f}")
    with open(os.path.join(args.out_dir, f"loss_{rank}.txt"), "w") as f:
        f.write(f"{total.item():.8f} {' '.join(f'{w:.8f}' for w in weights)}\n")
    dist.destroy_process_group()
    if rank == args.crash_rank:
        os._exit(3)


if __name__ == "__main__":
    main()
