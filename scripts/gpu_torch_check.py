#!/usr/bin/env python3
"""gpu_torch_check.py: PyTorch's torch.distributed on one GPU shared by several ranks (processes).

  scripts/gpu_torch_check.py --world 2 --losses out/losses.strata.2.txt --expect-nccl build/collectives/libnccl.so.2
  scripts/gpu_torch_check.py --world 2 --losses out/losses.nccl.2.txt --forbid-nccl build/collectives/libnccl.so.2
  scripts/gpu_torch_check.py --world 2 --backend gloo --ddp-only --losses out/losses.gloo.2.txt
  scripts/gpu_torch_check.py --compare A.txt B.txt [--rtol 1e-4 --atol 1e-6]

It starts --world processes (all on --device, cuda:0 by default; MASTER_ADDR 127.0.0.1, a free port)
that each run, with backend nccl: all_reduce (sum, max, min, product, avg; fp32, fp16, bf16, fp64,
int32, int64; a small and a large tensor), reduce, broadcast, all_gather, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single (even and uneven splits), send/recv (blocking pairs and
batch_isend_irecv around the ring), barrier, a new_group of the even ranks (all_reduce and
broadcast on it), every result checked exactly; then 50 steps of DistributedDataParallel on a small
MLP with a fixed seed, writing each rank's loss per step to --losses.

Which libnccl the ranks run on is read from /proc/self/maps: --expect-nccl PATH fails when any
libnccl mapped in a rank is not PATH (run it with LD_PRELOAD=PATH to put strata under PyTorch),
--forbid-nccl PATH fails when PATH is mapped. Rank 0 prints torch.cuda.nccl.version().

Exit status: 0 all passed; 1 a check failed; 3 the NCCL refused several ranks on one GPU
("Duplicate GPU detected": NCCL < 2.30 even with NCCL_MULTI_RANK_GPU_ENABLE=1), so the caller can
fall back to another reference; 2 usage.
"""

import argparse
import inspect
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

DUPLICATE_GPU = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mapped_nccl():
    """The libnccl files mapped into this process (real paths)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and "libnccl" in os.path.basename(parts[5].strip()):
                    found.add(os.path.realpath(parts[5].strip()))
    except OSError:
        pass
    return sorted(found)


# ---------------------------------------------------------------------------------------------------
# the worker: one rank


class Checks:
    def __init__(self, rank):
        self.rank, self.failed, self.passed, self.skipped = rank, [], 0, 0

    def expect(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append(name + (": " + detail if detail else ""))
            print(f"[{self.rank}] FAIL {name} {detail}", flush=True)


def run_collectives(torch, dist, dev, rank, world, chk, backend):
    """Every collective once or more, checked exactly. Every rank runs the same blocks in the same order.
    With a backend other than nccl (a CPU dry run with gloo), an operation it lacks is skipped."""
    ReduceOp = dist.ReduceOp

    def block(name, fn):
        try:
            fn()
        except (RuntimeError, NotImplementedError, ValueError, AttributeError) as e:
            text = str(e).lower()
            if backend != "nccl" and any(w in text for w in ("not supported", "unsupported", "not implemented",
                                                            "no attribute", "does not support", "cannot use", "invalid scalar type", "no support")):
                print(f"[{rank}] skip {name}: {backend}: {str(e).splitlines()[0][:100]}", flush=True)
                chk.skipped += 1
                return
            raise

    # all_reduce: exact values only (small integers), so every implementation must agree bit for bit
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64]
    sizes = [7, (1 << 20) + 3]  # an LL-sized and a bulk-sized message
    ops = {"sum": ReduceOp.SUM, "max": ReduceOp.MAX, "min": ReduceOp.MIN, "product": ReduceOp.PRODUCT}
    for dt in dtypes:
        for n in sizes:
            idx = torch.arange(n, device=dev) % 5
            base = (idx + rank + 1).to(dt)  # rank r: (i % 5) + r + 1
            ranks = torch.arange(world, device=dev).view(-1, 1)
            every = idx.view(1, -1) + ranks + 1  # [world, n], int64: every rank's input
            want = {"sum": every.sum(0), "max": every.max(0).values, "min": every.min(0).values,
                    "product": every.prod(0)}
            for name, op in ops.items():
                if name == "product" and (dt in (torch.float16, torch.bfloat16) or world > 4):
                    continue  # 8^4 = 4096 is not exact in fp16/bf16

                def one(name=name, op=op):
                    t = base.clone()
                    dist.all_reduce(t, op=op)
                    exp = want[name].to(dt)
                    chk.expect(f"all_reduce {name} {dt} n={n}", torch.equal(t, exp),
                               f"first {t[:4].tolist()} want {exp[:4].tolist()}")
                block(f"all_reduce {name} {dt}", one)
            if dt.is_floating_point and world & (world - 1) == 0:
                def avg():
                    t = ((idx + rank + 1) * world).to(dt)  # multiples of a power-of-two world: exact
                    dist.all_reduce(t, op=ReduceOp.AVG)
                    exp = every.sum(0).to(dt)
                    chk.expect(f"all_reduce avg {dt} n={n}", torch.equal(t, exp),
                               f"first {t[:4].tolist()} want {exp[:4].tolist()}")
                block(f"all_reduce avg {dt}", avg)
    n = (1 << 18) + 5
    f32 = torch.float32

    def reduce():
        root = world - 1
        t = torch.full((n,), float(rank + 1), device=dev)
        dist.reduce(t, dst=root, op=ReduceOp.SUM)
        if rank == root:
            chk.expect("reduce", bool((t == world * (world + 1) / 2).all()))
    block("reduce", reduce)

    def broadcast():
        root = 1 % world
        t = torch.arange(n, device=dev, dtype=f32) + (1000 if rank == root else 0)
        if rank != root:
            t.zero_()
        dist.broadcast(t, src=root)
        chk.expect("broadcast", torch.equal(t, torch.arange(n, device=dev, dtype=f32) + 1000))
    block("broadcast", broadcast)

    mine = torch.arange(n, device=dev, dtype=f32) + rank * n

    def all_gather():
        out = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(out, mine)
        chk.expect("all_gather", torch.equal(torch.cat(out), torch.arange(world * n, device=dev, dtype=f32)))
    block("all_gather", all_gather)

    def all_gather_into_tensor():
        big = torch.empty(world * n, device=dev, dtype=f32)
        dist.all_gather_into_tensor(big, mine)
        chk.expect("all_gather_into_tensor", torch.equal(big, torch.arange(world * n, device=dev, dtype=f32)))
    block("all_gather_into_tensor", all_gather_into_tensor)

    def reduce_scatter_tensor():
        # input[j] = j + rank, so element i of block r of the sum is world * (r*n + i) + sum of ranks
        inp = torch.arange(world * n, device=dev, dtype=f32) + rank
        out = torch.empty(n, device=dev, dtype=f32)
        dist.reduce_scatter_tensor(out, inp, op=ReduceOp.SUM)
        exp = (torch.arange(n, device=dev, dtype=f32) + rank * n) * world + world * (world - 1) / 2
        chk.expect("reduce_scatter_tensor", torch.equal(out, exp))
    block("reduce_scatter_tensor", reduce_scatter_tensor)

    def all_to_all_even():
        # block j of rank r holds 1000*r + j; rank r receives 1000*k + r from rank k
        m = 4099
        inp = torch.cat([torch.full((m,), float(1000 * rank + j), device=dev) for j in range(world)])
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp)
        exp = torch.cat([torch.full((m,), float(1000 * k + rank), device=dev) for k in range(world)])
        chk.expect("all_to_all_single", torch.equal(out, exp))
    block("all_to_all_single", all_to_all_even)

    def all_to_all_uneven():
        # rank r sends (r + j + 1) * 3 elements to rank j
        sends = [(rank + j + 1) * 3 for j in range(world)]
        recvs = [(k + rank + 1) * 3 for k in range(world)]
        inp = torch.cat([torch.full((sends[j],), float(1000 * rank + j), device=dev) for j in range(world)])
        out = torch.empty(sum(recvs), device=dev)
        dist.all_to_all_single(out, inp, output_split_sizes=recvs, input_split_sizes=sends)
        exp = torch.cat([torch.full((recvs[k],), float(1000 * k + rank), device=dev) for k in range(world)])
        chk.expect("all_to_all_single uneven", torch.equal(out, exp))
    block("all_to_all_single uneven", all_to_all_uneven)

    def send_recv_pairs():  # even ranks send first
        partner = rank ^ 1
        if partner >= world:
            return
        t = torch.full((n,), float(rank), device=dev)
        r = torch.empty(n, device=dev)
        if rank % 2 == 0:
            dist.send(t, dst=partner)
            dist.recv(r, src=partner)
        else:
            dist.recv(r, src=partner)
            dist.send(t, dst=partner)
        chk.expect("send/recv pair", bool((r == partner).all()))

    def ring():
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        t = torch.full((n,), float(rank), device=dev)
        r = torch.empty(n, device=dev)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, nxt), dist.P2POp(dist.irecv, r, prv)])
        for q in reqs:
            q.wait()
        chk.expect("batch_isend_irecv ring", bool((r == prv).all()))
    if world >= 2:
        block("send/recv", send_recv_pairs)
        block("batch_isend_irecv", ring)

    dist.barrier()
    chk.expect("barrier", True)

    # a group of the even ranks (created by every rank)
    evens = list(range(0, world, 2))
    g = dist.new_group(ranks=evens)
    if rank in evens:
        t = torch.full((n,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=g)
        chk.expect("new_group all_reduce", bool((t == sum(r + 1 for r in evens)).all()))
        t = torch.full((n,), float(rank), device=dev)
        dist.broadcast(t, src=evens[-1], group=g)
        chk.expect("new_group broadcast", bool((t == evens[-1]).all()))
    dist.barrier()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_ddp(torch, dist, dev, rank, world, steps, losses_path, backend):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                torch.nn.Tanh(), torch.nn.Linear(64, 8)).to(dev)
    cuda = dev.type == "cuda"
    ddp = DDP(model, device_ids=[dev.index] if cuda else None, output_device=dev.index if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator(device="cpu").manual_seed(1000 + rank)  # each rank its own data
    w_true = torch.Generator(device="cpu").manual_seed(7)
    target_map = torch.randn(32, 8, generator=w_true)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen)
        y = torch.tanh(x @ target_map)
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    side = dev if backend == "nccl" else torch.device("cpu")  # gloo: gather on the host
    local = torch.stack(losses).to(side, torch.float64)  # [steps]
    every = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(every, local)
    # the parameters must be identical on every rank after DDP
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).to(side, torch.float64)
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    same = torch.equal(flat, ref)
    if rank == 0:
        table = torch.stack(every, 1).cpu().tolist()  # [steps][world]
        with open(losses_path, "w") as f:
            f.write("# step " + " ".join(f"rank{r}" for r in range(world)) + "\n")
            for s, row in enumerate(table):
                f.write(f"{s} " + " ".join(repr(v) for v in row) + "\n")
    return same


def worker(a):
    rank, world = a.rank, a.world
    chk = Checks(rank)
    try:
        import torch
        import torch.distributed as dist
        from datetime import timedelta
        dev = torch.device(a.device)
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        libs = mapped_nccl()
        print(f"[{rank}] pid {os.getpid()} libnccl mapped: {libs or 'none'}", flush=True)
        if a.expect_nccl:
            want = os.path.realpath(a.expect_nccl)
            chk.expect("runs on the expected libnccl", libs == [want], f"mapped {libs}, expected [{want}]")
        if a.forbid_nccl:
            bad = os.path.realpath(a.forbid_nccl)
            chk.expect("does not run on the forbidden libnccl", bad not in libs, f"mapped {libs}")
        if rank == 0:
            try:
                v = torch.cuda.nccl.version()
            except Exception as e:  # noqa: BLE001
                v = f"unavailable ({e})"
            name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
            print(f"[0] torch {torch.__version__}, CUDA {torch.version.cuda}, torch.cuda.nccl.version() = {v}, "
                  f"device {name}, backend {a.backend}", flush=True)
        kw = {}
        if a.backend == "nccl" and "device_id" in inspect.signature(dist.init_process_group).parameters:
            kw["device_id"] = dev  # binds the device: eager init, and new_group by ncclCommSplit
        dist.init_process_group(a.backend, init_method=f"tcp://127.0.0.1:{a.port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=a.timeout), **kw)
        t0 = time.monotonic()
        if not a.ddp_only:
            run_collectives(torch, dist, dev, rank, world, chk, a.backend)
            print(f"[{rank}] collectives: {chk.passed} checks passed, {len(chk.failed)} failed, {chk.skipped} skipped "
                  f"({time.monotonic() - t0:.1f} s)", flush=True)
        if a.losses:
            same = run_ddp(torch, dist, dev, rank, world, a.steps, a.losses, a.backend)
            chk.expect("DDP parameters equal on every rank", same)
            print(f"[{rank}] DDP: {a.steps} steps done", flush=True)
        libs_after = mapped_nccl()
        if libs_after != libs:
            print(f"[{rank}] libnccl mapped after the run: {libs_after}", flush=True)
            if a.expect_nccl:
                chk.expect("still only the expected libnccl", libs_after == [os.path.realpath(a.expect_nccl)],
                           f"{libs_after}")
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001
        text = f"{type(e).__name__}: {e}"
        print(f"[{rank}] EXCEPTION {text}\n{traceback.format_exc()}", flush=True)
        if "Duplicate GPU" in text:
            return DUPLICATE_GPU
        chk.failed.append(text.splitlines()[0] if text else "exception")
    if chk.failed:
        print(f"[{rank}] FAILED: {len(chk.failed)} check(s): " + "; ".join(chk.failed[:10]), flush=True)
        return 1
    print(f"[{rank}] OK ({chk.passed} checks{f', {chk.skipped} skipped' if chk.skipped else ''})", flush=True)
    return 0


# ---------------------------------------------------------------------------------------------------
# the launcher and the loss comparison


def launch(a):
    port = free_port()
    logs = tempfile.mkdtemp(prefix="gpu_torch_check.")
    procs = []
    env = dict(os.environ)
    env.setdefault("NCCL_MULTI_RANK_GPU_ENABLE", "1")  # NVIDIA NCCL >= 2.30: several ranks per GPU
    for r in range(a.world):
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(r), "--world", str(a.world),
                "--port", str(port), "--backend", a.backend, "--device", a.device, "--steps", str(a.steps),
                "--timeout", str(a.timeout)]
        for opt in ("losses", "expect_nccl", "forbid_nccl"):
            if getattr(a, opt):
                argv += ["--" + opt.replace("_", "-"), getattr(a, opt)]
        if a.ddp_only:
            argv.append("--ddp-only")
        out = open(os.path.join(logs, f"rank{r}.log"), "w")
        procs.append((subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT), out))
    deadline = time.monotonic() + a.timeout + 60
    codes = []
    for p, out in procs:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(124)
        out.close()
    for p, _ in procs:
        if p.poll() is None:
            p.kill()
    for r in range(a.world):
        with open(os.path.join(logs, f"rank{r}.log"), errors="replace") as f:
            for line in f:
                print(line if line.startswith("[") else f"[{r}] {line}", end="")
    print(f"exit codes per rank: {codes}")
    if any(c == 124 for c in codes):
        print(f"TIMEOUT after {a.timeout + 60} s")
        return 1
    if any(c == DUPLICATE_GPU for c in codes):
        return DUPLICATE_GPU
    return 0 if all(c == 0 for c in codes) else 1


def read_losses(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append([float(v) for v in line.split()[1:]])
    return rows


def compare(a):
    x, y = read_losses(a.compare[0]), read_losses(a.compare[1])
    if len(x) != len(y) or any(len(p) != len(q) for p, q in zip(x, y)) or not x:
        print(f"compare: shapes differ: {len(x)} and {len(y)} steps")
        return 1
    worst, worst_at, identical = 0.0, None, True
    for s, (p, q) in enumerate(zip(x, y)):
        for r, (u, v) in enumerate(zip(p, q)):
            identical &= u == v
            excess = abs(u - v) - (a.atol + a.rtol * abs(v))
            rel = abs(u - v) / max(abs(v), 1e-30)
            if rel > worst:
                worst, worst_at = rel, (s, r, u, v)
            if excess > 0:
                print(f"compare: step {s} rank {r}: {u!r} vs {v!r} (beyond rtol {a.rtol}, atol {a.atol})")
                return 1
    first, last = x[0][0], x[-1][0]
    print(f"compare: {len(x)} steps x {len(x[0])} ranks within rtol {a.rtol}: "
          f"{'bitwise identical' if identical else f'max relative difference {worst:.3g} at step {worst_at[0]} rank {worst_at[1]}'}"
          f"; rank 0 loss {first:.6f} -> {last:.6f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--backend", default="nccl")
    p.add_argument("--device", default="cuda:0", help="every rank's device (default cuda:0: all share one GPU)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--losses", help="write the per-step, per-rank DDP losses here (rank 0)")
    p.add_argument("--ddp-only", action="store_true", help="only the DDP run (e.g. a gloo reference)")
    p.add_argument("--expect-nccl", help="fail unless this is the only libnccl mapped in every rank")
    p.add_argument("--forbid-nccl", help="fail when this libnccl is mapped in a rank")
    p.add_argument("--timeout", type=int, default=180, help="seconds for the whole job (and init)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --losses files and exit")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.compare:
        return compare(a)
    if a.worker:
        return worker(a)
    if a.world < 1:
        p.error("--world must be >= 1")
    return launch(a)


if __name__ == "__main__":
    sys.exit(main())
