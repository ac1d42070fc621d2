#!/usr/bin/env python3
"""torch.distributed.all_reduce (float32 sum, in place) on CPU tensors: the "strata" backend vs
"gloo", and the same sizes straight through strata's C API on the strata group's communicator
(strata_torch._C.native_all_reduce_seconds: no torch dispatch, Work or progress thread), in one
run on one machine. Prints a table: time per call (median of --reps timed loops, each the slowest
rank's), busbw, strata's speedup over gloo and its overhead over the native API.

    PYTHONPATH=build/integrations/pytorch python3 perf/torch/allreduce_bench.py --ranks 2
"""
import argparse
import datetime
import faulthandler
import os
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def sizes(lo, hi):
    s = lo
    while s <= hi:
        yield s
        s *= 4


def timed(fn, iters):
    dist.barrier()
    t0 = time.perf_counter()
    fn(iters)
    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(dt, op=dist.ReduceOp.MAX)  # the slowest rank's time
    return dt.item() / iters


def worker(rank, n, backend, init, args, q):
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <rank> prints where it is
    if backend == "strata":
        import strata_torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=300))
    rows = []
    for nbytes in sizes(args.min, args.max):
        t = torch.ones(nbytes // 4)
        iters = max(3, min(args.max_iters, int(args.budget / max(nbytes / 1e9, 1e-6) / 50)))
        def torch_loop(k):
            for _ in range(k):
                dist.all_reduce(t)
        torch_loop(3)
        res = {"bytes": nbytes, "iters": iters,
               "torch": sorted(timed(torch_loop, iters) for _ in range(args.reps))[args.reps // 2]}
        if backend == "strata":
            import strata_torch
            pg = dist.distributed_c10d._get_default_group()
            native = lambda k: strata_torch._C.native_all_reduce_seconds(pg, t, k)  # noqa: E731
            native(3)
            res["native"] = sorted(timed(native, iters) for _ in range(args.reps))[args.reps // 2]
        rows.append(res)
    if rank == 0:
        q.put((backend, rows))
    dist.barrier()
    dist.destroy_process_group()


def run(backend, args):
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    init = f"file://{tempfile.mkdtemp(prefix='strata-torch-bench-')}/rdv"
    procs = [ctx.Process(target=worker, args=(r, args.ranks, backend, init, args, q)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    # Rank 0's rows first: a rank that hangs on its way out (torch 2.6's Gloo, at random, after
    # destroy_process_group) must not hold up results already delivered.
    while q.empty():
        bad = [p.exitcode for p in procs if p.exitcode]
        if bad or all(p.exitcode is not None for p in procs) and q.empty():
            for p in procs:
                p.kill()
            raise SystemExit(f"{backend}: a rank exited with {bad[0] if bad else 0} before reporting")
        time.sleep(0.05)
    rows = q.get()[1]
    for p in procs:
        p.join(30)
        if p.is_alive():
            print(f"# {backend}: a rank had not exited 30 s after reporting; stopped", file=sys.stderr)
            p.kill()
    return rows


def fmt_size(b):
    for u, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= s:
            return f"{b // s}{u}"
    return str(b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--min", type=parse_size, default=parse_size("4K"))
    p.add_argument("--max", type=parse_size, default=parse_size("64M"))
    p.add_argument("--reps", type=int, default=5, help="timed loops per size; the median is reported")
    p.add_argument("--max-iters", type=int, default=200)
    p.add_argument("--budget", type=float, default=0.02, help="rough seconds per timed loop at 1 GB/s")
    args = p.parse_args()
    gloo = run("gloo", args)
    strata = run("strata", args)
    n = args.ranks
    print(f"# all_reduce float32 sum in place, {n} ranks (processes), CPU tensors; time per call in us "
          f"(median of {args.reps} loops, slowest rank); busbw = 2(n-1)/n * bytes / time")
    print(f"{'bytes':>6} {'gloo':>10} {'strata':>10} {'native':>10} {'busbw GB/s':>10} "
          f"{'strata/gloo':>11} {'torch/native':>12}")
    for g, s in zip(gloo, strata):
        busbw = 2 * (n - 1) / n * s["bytes"] / s["torch"] / 1e9
        print(f"{fmt_size(s['bytes']):>6} {g['torch'] * 1e6:10.1f} {s['torch'] * 1e6:10.1f} {s['native'] * 1e6:10.1f} "
              f"{busbw:10.2f} {g['torch'] / s['torch']:10.2f}x {s['torch'] / s['native']:11.2f}x")


if __name__ == "__main__":
    main()
