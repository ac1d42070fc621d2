#!/usr/bin/env python3
"""Trains a small decoder-only transformer on CPU with PyTorch 2.x's parallel APIs on any
torch.distributed backend, and writes one line per step: `<step> <global mean loss> <step seconds>`.

    torchrun --nproc_per_node 2 train.py --mode fsdp  --backend strata --out fsdp.txt
    torchrun --nproc_per_node 2 train.py --mode tp    --backend strata --out tp.txt
    torchrun --nproc_per_node 4 train.py --mode dp_tp --backend strata --out dp_tp.txt

Modes:
  fsdp   FullyShardedDataParallel (FSDP1, device_id=cpu, FULL_SHARD) over every rank: parameters
         all-gathered per layer, gradients reduce-scattered.
  fsdp2  FSDP2's fully_shard per block and on the root, over a 1-D DeviceMesh (needs a torch
         whose FSDP2 runs on CPU: 2.6's fails with gloo too, "'Stream' object has no attribute
         'record_event'"; 2.14 runs it).
  tp     DTensor tensor parallelism over every rank (init_device_mesh("cpu", (n,))): attention
         q/k/v and the MLP's first layer column-wise, their output layers row-wise
         (parallelize_module); every rank sees the same batch.
  dp_tp  a 2-D DeviceMesh ("dp", "tp") = (n/2, 2): tensor parallel inside each "tp" row as above,
         gradients averaged across "dp" with all_reduce on the mesh's dp group.
Model, data and initial weights come from fixed seeds, so two backends must give the same losses
up to float rounding (run.sh compares them).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.head_dim = d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.ln1(x)
        # -1 heads: under tensor parallelism each rank holds heads/tp of them.
        q, k, v = (p(h).view(b, t, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def batch(gen, a):
    """Sequences of a fixed noisy rule (next = 5 * cur + 3 mod vocab), so the loss falls."""
    x = torch.randint(0, a.vocab, (a.batch, 1), generator=gen)
    seq = [x]
    for _ in range(a.seq):
        nxt = (5 * seq[-1] + 3) % a.vocab
        flip = torch.rand(nxt.shape, generator=gen) < 0.1
        seq.append(torch.where(flip, torch.randint(0, a.vocab, nxt.shape, generator=gen), nxt))
    s = torch.cat(seq, 1)
    return s[:, :-1], s[:, 1:]


def tensor_parallel(model, tp_mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {}
    for i in range(len(model.blocks)):
        for name in ("q", "k", "v", "up"):
            plan[f"blocks.{i}.{name}"] = ColwiseParallel()
        for name in ("o", "down"):
            plan[f"blocks.{i}.{name}"] = RowwiseParallel()
    return parallelize_module(model, tp_mesh, plan)


def local(t):
    """The local shard of a DTensor gradient, or the tensor itself."""
    return t._local_tensor if hasattr(t, "_local_tensor") else t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["fsdp", "fsdp2", "tp", "dp_tp"], required=True)
    p.add_argument("--backend", default="strata")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=8, help="sequences per data-parallel rank per step")
    p.add_argument("--out", help="rank 0 writes its per-step lines here")
    a = p.parse_args()
    if a.backend == "strata":
        import strata_torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group(a.backend)  # env:// from torchrun
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = Transformer(a.vocab, a.dim, a.heads, a.layers, a.seq)
    dp_group, dp_rank, dp_size = None, rank, n
    if a.mode == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy
        model = FSDP(model, device_id=torch.device("cpu"), sharding_strategy=ShardingStrategy.FULL_SHARD,
                     auto_wrap_policy=lambda module, recurse, nonwrapped_numel: recurse or isinstance(module, Block))
    elif a.mode == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:  # 2.4-2.5
            from torch.distributed._composable.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (n,))
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        if a.mode == "tp":
            mesh = init_device_mesh("cpu", (n,), mesh_dim_names=("tp",))
            model = tensor_parallel(model, mesh["tp"])
            dp_rank, dp_size = 0, 1
        else:
            if n % 2:
                raise SystemExit("dp_tp needs an even number of ranks")
            mesh = init_device_mesh("cpu", (n // 2, 2), mesh_dim_names=("dp", "tp"))
            model = tensor_parallel(model, mesh["tp"])
            dp_group = mesh.get_group("dp")
            dp_rank, dp_size = mesh.get_local_rank("dp"), n // 2
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1234 + dp_rank)  # one data shard per data-parallel rank
    lines = []
    for step in range(a.steps):
        x, y = batch(gen, a)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, a.vocab), y.reshape(-1))
        loss.backward()
        if dp_group is not None:  # data parallel across the mesh's dp dimension
            for prm in model.parameters():
                if prm.grad is not None:
                    g = local(prm.grad)
                    dist.all_reduce(g, group=dp_group)
                    g.div_(dp_size)
        opt.step()
        dt = time.perf_counter() - t0
        g = loss.detach().clone()
        dist.all_reduce(g)  # the global mean loss, for the log (tp ranks hold the same loss)
        lines.append(f"{step} {g.item() / n:.9g} {dt:.6f}")
    dist.barrier()
    dist.destroy_process_group()  # together, before rank 0 writes (see perf/torch/allreduce_bench.py)
    if rank == 0:
        params = sum(p.numel() for p in Transformer(a.vocab, a.dim, a.heads, a.layers, a.seq).parameters())
        med = sorted(float(l.split()[2]) for l in lines)[len(lines) // 2]
        print(f"{a.mode} {a.backend}: {n} ranks, {params / 1e6:.2f} M parameters, first loss {lines[0].split()[1]}, "
              f"final loss {lines[-1].split()[1]}, median step {med * 1e3:.1f} ms")
        if a.out:
            with open(a.out, "w") as f:
                f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
