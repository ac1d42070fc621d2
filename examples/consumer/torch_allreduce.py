"""torch_allreduce.py: the installed strata_torch package as a torch.distributed backend, outside
strata's tree: 2 processes (torch.multiprocessing), file:// rendezvous, one all-reduce checked.
    python3 examples/consumer/torch_allreduce.py
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import strata_torch

WORLD = 2


def rank_main(rank, init_file):
    dist.init_process_group("strata", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    t = torch.full((1024,), float(rank + 1))
    dist.all_reduce(t)
    want = WORLD * (WORLD + 1) / 2
    if not torch.all(t == want):
        raise SystemExit(f"rank {rank}: all_reduce gave {t[0].item()}, expected {want}")
    print(f"torch: rank {rank} of {WORLD}, backend {dist.get_backend()}, all_reduce = {t[0].item()} (ok)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    print(f"strata_torch {strata_torch.version()} from {os.path.dirname(strata_torch.__file__)}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(rank_main, args=(os.path.join(d, "init"),), nprocs=WORLD, join=True)
    sys.exit(0)
