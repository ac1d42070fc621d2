#!/usr/bin/env python3
"""Trains a small MLP with DistributedDataParallel on CPU, on any torch.distributed backend, and
writes one line per step: `<step> <global mean loss> <step seconds>`.

    torchrun --nproc_per_node 2 ddp_train.py --backend strata --out strata.txt
    torchrun --nproc_per_node 2 ddp_train.py --backend gloo   --out gloo.txt

The model is wide and the batch small, so gradient all-reduce dominates a step. Data and
initial weights come from fixed seeds, so two backends must produce the same losses up to float
rounding (run.sh compares them).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="strata")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--width", type=int, default=2048, help="hidden width (parameters ~ 3 * width^2)")
    p.add_argument("--batch", type=int, default=4, help="samples per rank per step")
    p.add_argument("--out", help="rank 0 writes its per-step lines here")
    a = p.parse_args()
    if a.backend == "strata":
        import strata_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)  # env:// from torchrun
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = nn.Sequential(nn.Linear(64, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(),
                          nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1234 + rank)  # each rank its own shard of the data
    teacher = torch.Generator().manual_seed(99)
    w_true = torch.randn(64, 10, generator=teacher)
    lines = []
    for step in range(a.steps):
        x = torch.randn(a.batch, 64, generator=gen)
        y = (x @ w_true).argmax(1)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        dt = time.perf_counter() - t0
        g = loss.detach().clone()
        dist.all_reduce(g)  # the global mean loss, for the log
        lines.append(f"{step} {g.item() / n:.9g} {dt:.6f}")
    dist.barrier()
    dist.destroy_process_group()  # together, before rank 0 writes (see perf/torch/allreduce_bench.py)
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        print(f"{a.backend}: {n} ranks, {params / 1e6:.2f} M parameters, final loss {lines[-1].split()[1]}, "
              f"median step {sorted(float(l.split()[2]) for l in lines)[len(lines) // 2] * 1e3:.1f} ms")
        if a.out:
            with open(a.out, "w") as f:
                f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
