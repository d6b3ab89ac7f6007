"""A small DDP training script: a linear regression trained on 2+ ranks with gloo.

Run it with ``trainlaunch run dist.ddp --nproc 2 examples/train.py --steps 200``
(or plain ``torchrun --nproc-per-node 2 examples/train.py``). It seeds every rank and
logs metrics through ``trainlaunch.rank.setup()``.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import trainlaunch.rank as tlrank


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logger = tlrank.setup()  # seeds this rank; logs only where the export strategy says
    torch.manual_seed(1234)  # identical initial weights on every rank
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    true_w = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8
    gen = torch.Generator().manual_seed(rank)  # each rank sees different data
    for step in range(args.steps):
        x = torch.randn(32, 8, generator=gen)
        y = x @ true_w + 0.01 * torch.randn(32, 1, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        logger.log(tlrank.MetricsSample(step=step, epoch=0, metrics={"loss": loss.item()}))
        if rank == 0 and step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    logger.close()
    if rank == 0:
        print(f"done: world={world} final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
