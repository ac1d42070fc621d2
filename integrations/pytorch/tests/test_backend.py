#!/usr/bin/env python3
"""Tests of the "strata" torch.distributed backend on CPU tensors: every c10d operation with
every dtype strata carries, every ReduceOp, non-contiguous tensors, uneven all-to-all, async
Works and futures, send/recv batches that would deadlock if run one by one, subgroups, the three
init methods, and failures (timeout, dead peer, bad arguments) that must raise, never hang.

Ranks are processes (torch.multiprocessing spawn); each test spawns its world and fails when a
rank raises or exits non-zero. Run: PYTHONPATH=<build>/integrations/pytorch python3 test_backend.py
"""
import datetime
import faulthandler
import os
import socket
import sys
import tempfile
import time
import traceback
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import strata_torch  # noqa: F401  (registers "strata")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8,
          torch.int8]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, n, fn, init, timeout_s, errq, backend):
    faulthandler.dump_traceback_later(150, exit=True)  # a hung rank prints where it hangs
    try:
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=n,
                                timeout=datetime.timedelta(seconds=timeout_s))
        fn(rank, n)
        dist.destroy_process_group()
    except BaseException:  # noqa: B902  (report everything, including asserts)
        errq.put(f"rank {rank}: {traceback.format_exc()}")
        sys.stdout.flush()
        os._exit(1)


def spawn(fn, n, init=None, timeout_s=60, backend="strata"):
    """Runs fn(rank, n) on n processes; raises with every failing rank's traceback."""
    ctx = mp.get_context("spawn")
    errq = ctx.SimpleQueue()
    tmp = tempfile.mkdtemp(prefix="strata-torch-test-")
    init = init or f"file://{tmp}/rendezvous"
    procs = [ctx.Process(target=_entry, args=(r, n, fn, init, timeout_s, errq, backend)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    hung = [i for i, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
    errors = []
    while not errq.empty():
        errors.append(errq.get())
    if hung:
        errors.append(f"ranks {hung} did not finish within 180 s")
    if errors:
        raise AssertionError("\n".join(errors))
    bad = [(i, p.exitcode) for i, p in enumerate(procs) if p.exitcode != 0]
    if bad:
        raise AssertionError(f"exit codes {bad}")


def value(rank, dtype, shape=(7, 5)):
    """A rank's input: small values so sums and products stay exact in every dtype."""
    t = (torch.arange(int(torch.tensor(shape).prod())) % 3 + 1 + rank % 2).reshape(shape)
    return t.to(dtype)


# ---- world-wide checks (each runs inside every rank) ----

def check_reductions(rank, n):
    for dtype in DTYPES:
        ins = [value(r, dtype) for r in range(n)]
        stacked = torch.stack([i.double() for i in ins])
        expect = {
            dist.ReduceOp.SUM: stacked.sum(0), dist.ReduceOp.PRODUCT: stacked.prod(0),
            dist.ReduceOp.MIN: stacked.min(0).values, dist.ReduceOp.MAX: stacked.max(0).values,
        }
        for op, want in expect.items():
            t = ins[rank].clone()
            dist.all_reduce(t, op=op)
            assert torch.equal(t.double(), want), (dtype, op, t, want)
            t = ins[rank].clone()
            dist.reduce(t, dst=n - 1, op=op)
            if rank == n - 1:
                assert torch.equal(t.double(), want), ("reduce", dtype, op)
            else:
                assert torch.equal(t, ins[rank]), "reduce changed a non-root's tensor"
        if not dtype.is_floating_point:
            for op, f in [(dist.ReduceOp.BAND, torch.bitwise_and), (dist.ReduceOp.BOR, torch.bitwise_or),
                          (dist.ReduceOp.BXOR, torch.bitwise_xor)]:
                t = ins[rank].clone()
                dist.all_reduce(t, op=op)
                want = ins[0].clone()
                for i in ins[1:]:
                    want = f(want, i)
                assert torch.equal(t, want), (dtype, op)
    # bool: SUM is logical or, PRODUCT logical and.
    b = torch.tensor([rank == 0, True, False])
    t = b.clone(); dist.all_reduce(t); assert t.tolist() == [True, True, False]
    t = b.clone(); dist.all_reduce(t, op=dist.ReduceOp.PRODUCT); assert t.tolist() == [n == 1, True, False]
    t = b.clone(); dist.all_reduce(t, op=dist.ReduceOp.BXOR); assert t.tolist() == [True, n % 2 == 1, False]
    # complex sums, averages, pre-multiplied sums
    c = torch.tensor([1 + 2j, rank - 1j], dtype=torch.complex64)
    dist.all_reduce(c)
    assert torch.allclose(c, torch.tensor([n + 2j * n, sum(range(n)) - 1j * n], dtype=torch.complex64))
    a = torch.full((4,), float(rank))
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    assert torch.allclose(a, torch.full((4,), (n - 1) / 2))
    p = torch.full((3,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(p, op=dist._make_nccl_premul_sum(0.5))
    assert torch.allclose(p, torch.full((3,), 0.5 * n * (n + 1) / 2, dtype=torch.float64))


def check_reduce_scatter(rank, n):
    for dtype in [torch.float32, torch.int64, torch.bfloat16]:
        ins = [value(rank, dtype, (3, 2)) + i for i in range(n)]
        out = torch.empty(3, 2, dtype=dtype)
        dist.reduce_scatter(out, ins)
        want = sum(value(r, dtype, (3, 2)).double() + rank for r in range(n))
        assert torch.equal(out.double(), want), (dtype, out, want)
        flat = torch.cat([i.reshape(-1) for i in ins])
        out2 = torch.empty(6, dtype=dtype)
        dist._reduce_scatter_base(out2, flat)
        assert torch.equal(out2.double(), want.reshape(-1))
    ints = [torch.tensor([rank + 1, 6, i], dtype=torch.int32) for i in range(n)]
    out = torch.empty(3, dtype=torch.int32)
    dist.reduce_scatter(out, ints, op=dist.ReduceOp.BOR)
    want = torch.tensor([0, 6, rank], dtype=torch.int32)
    for r in range(n):
        want[0] |= r + 1
    assert torch.equal(out, want), (out, want)


def check_data_movement(rank, n):
    for dtype in DTYPES + [torch.int16, torch.complex128, torch.bool]:
        src = (value(rank, torch.int64, (4, 3)) * (rank + 1)).to(dtype)
        b = src.clone()
        dist.broadcast(b, src=n - 1)
        want = (value(n - 1, torch.int64, (4, 3)) * n).to(dtype)
        assert torch.equal(b, want), ("broadcast", dtype)
        outs = [torch.empty_like(src) for _ in range(n)]
        dist.all_gather(outs, src)
        for r in range(n):
            assert torch.equal(outs[r], (value(r, torch.int64, (4, 3)) * (r + 1)).to(dtype)), ("all_gather", dtype)
        big = torch.empty((n * 4, 3), dtype=dtype)
        dist.all_gather_into_tensor(big, src)
        assert torch.equal(big, torch.cat(outs)), ("all_gather_into_tensor", dtype)
        g = [torch.empty_like(src) for _ in range(n)] if rank == 0 else None
        dist.gather(src, g, dst=0)
        if rank == 0:
            assert all(torch.equal(g[r], outs[r]) for r in range(n)), ("gather", dtype)
        s = torch.empty_like(src)
        dist.scatter(s, [o.clone() for o in outs] if rank == 1 % n else None, src=1 % n)
        assert torch.equal(s, outs[rank]), ("scatter", dtype)
    # all_gather_coalesced with mixed dtypes and sizes
    ins = [torch.full((2,), rank + 0.25, dtype=torch.float16), torch.full((3, 1), rank + 0.5, dtype=torch.float16)]
    outs = [[torch.empty_like(i) for i in ins] for _ in range(n)]  # outs[r][i]: rank r's ins[i]
    dist.all_gather_coalesced(outs, ins)
    for r in range(n):
        assert torch.equal(outs[r][0], torch.full((2,), r + 0.25, dtype=torch.float16)) and torch.equal(outs[r][1], torch.full((3, 1), r + 0.5, dtype=torch.float16))
    # all_reduce_coalesced
    ts = [torch.full((3,), float(rank)), torch.full((2, 2), 1.0)]
    dist.all_reduce_coalesced(ts)
    assert torch.equal(ts[0], torch.full((3,), float(sum(range(n))))) and torch.equal(ts[1], torch.full((2, 2), float(n)))


def check_all_to_all(rank, n):
    x = torch.arange(n * 4, dtype=torch.float32) + 100 * rank
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float32) + 100 * r for r in range(n)])
    assert torch.equal(y, want), (y, want)
    # uneven: rank r sends (r + p + 1) rows of width 3 to p
    ins_split = [rank + p + 1 for p in range(n)]
    outs_split = [p + rank + 1 for p in range(n)]
    x = torch.cat([torch.full((k, 3), float(rank * 10 + p)) for p, k in enumerate(ins_split)])
    y = torch.empty(sum(outs_split), 3)
    dist.all_to_all_single(y, x, outs_split, ins_split)
    want = torch.cat([torch.full((k, 3), float(p * 10 + rank)) for p, k in enumerate(outs_split)])
    assert torch.equal(y, want)
    # list form with a zero-size block
    ins = [torch.full((p + 1 if p != (rank + 1) % n else 0,), rank, dtype=torch.int64) for p in range(n)]
    outs = [torch.empty(rank + 1 if rank != (p + 1) % n else 0, dtype=torch.int64) for p in range(n)]
    dist.all_to_all(outs, ins)
    for p in range(n):
        assert torch.equal(outs[p], torch.full_like(outs[p], p))


def check_non_contiguous(rank, n):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) + rank
    t = base.t()  # non-contiguous view
    assert not t.is_contiguous()
    dist.all_reduce(t)
    assert torch.equal(base, n * torch.arange(24, dtype=torch.float32).reshape(4, 6) + sum(range(n)))
    b = torch.zeros(6, 4)[:, ::2]  # strided view
    if rank == 0:
        b.copy_(torch.ones(6, 2) * 7)
    dist.broadcast(b, src=0)
    assert torch.equal(b, torch.ones(6, 2) * 7)
    outs = [torch.zeros(3, 4).t() for _ in range(n)]
    dist.all_gather(outs, torch.full((4, 3), float(rank)))
    assert all(torch.equal(outs[r], torch.full((4, 3), float(r))) for r in range(n))
    if n >= 2:
        if rank == 0:
            dist.send(torch.arange(8, dtype=torch.float32).reshape(2, 4).t(), 1)
        elif rank == 1:
            r = torch.zeros(2, 4).t()
            dist.recv(r, 0)
            assert torch.equal(r, torch.arange(8, dtype=torch.float32).reshape(2, 4).t())


def check_async_and_p2p(rank, n):
    # Both directions posted before any wait: run one by one they would deadlock.
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    for size in [1, 1000, 1 << 20]:
        out, inn = torch.full((size,), float(rank)), torch.empty(size)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, inn, prv), dist.P2POp(dist.isend, out, nxt)])
        for r in reqs:
            r.wait()
        assert torch.equal(inn, torch.full((size,), float(prv)))
        r1 = dist.irecv(inn, prv)
        s1 = dist.isend(out, nxt)
        s1.wait()
        r1.wait()
        assert torch.equal(inn, torch.full((size,), float(prv)))
    # async collectives, polling, futures
    t = torch.ones(1 << 16)
    w = dist.all_reduce(t, async_op=True)
    deadline = time.time() + 30
    while not w.is_completed():
        assert time.time() < deadline, "is_completed never became true"
        time.sleep(0.001)
    assert w.is_success() and torch.equal(t, torch.full((1 << 16,), float(n)))
    fut = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    assert torch.equal(fut.wait(), torch.full((4,), 2.0 * n))
    ws = [dist.all_reduce(torch.full((8,), float(i)), async_op=True) for i in range(20)]
    for w in ws:
        w.wait()
    dist.barrier()
    if dist.get_rank() == 0:
        assert dist.get_backend() == "strata"


def check_subgroups(rank, n):
    evens = dist.new_group([r for r in range(n) if r % 2 == 0])
    odds = dist.new_group([r for r in range(n) if r % 2 == 1])
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(n) if r % 2 == rank % 2]
    t = torch.full((5,), float(rank))
    dist.all_reduce(t, group=mine)
    assert torch.equal(t, torch.full((5,), float(sum(members))))
    b = torch.full((2,), float(rank))
    dist.broadcast(b, src=members[-1], group=mine)  # global rank of the root
    assert torch.equal(b, torch.full((2,), float(members[-1])))
    dist.barrier(group=mine)
    dist.all_reduce(t)  # the world still works between subgroup calls


def check_errors(rank, n):
    cases = [
        (lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), "Short"),
        (lambda: dist.all_reduce(torch.ones(3, dtype=torch.complex64), op=dist.ReduceOp.MAX), "complex"),
        (lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND), "BAND"),
        (lambda: dist.all_to_all_single(torch.empty(5), torch.empty(4 * n + 1)), "all_to_all_single"),
        (lambda: dist.all_to_all_single(torch.empty(2 * n, 2), torch.empty(2 * n, 2), [2] * n, [1] * n), "split"),
        (lambda: dist.recv(torch.empty(2)), "any source"),
        (lambda: dist.all_gather_into_tensor(torch.empty(3), torch.empty(2)), "times its elements"),
    ]
    for fn, needle in cases:
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            assert needle in str(e), f"error '{e}' does not mention '{needle}'"
        else:
            raise AssertionError(f"no error for a bad call (expected one mentioning '{needle}')")
    # The group still works after refused calls.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(n)))


def one_all_reduce(rank, n):
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == n


def silent_peer(rank, n):
    """Rank 1 never joins the all-reduce: rank 0's wait must raise within the 3 s group timeout."""
    if rank == 0:
        start = time.time()
        try:
            dist.all_reduce(torch.ones(1000))
        except RuntimeError as e:
            took = time.time() - start
            assert took < 15, f"took {took:.1f} s"
            assert "rank 1" in str(e) or "Timeout" in str(e) or "timeout" in str(e), str(e)
        else:
            raise AssertionError("all_reduce with a silent peer returned")
    else:
        time.sleep(8)
    os._exit(0)  # the communicator is broken; skip destroy


def dead_peer(rank, n):
    """Rank 1 dies; rank 0's pending and later waits raise naming it."""
    if rank == 1:
        time.sleep(0.5)
        os._exit(0)
    start = time.time()
    w = dist.all_reduce(torch.ones(1 << 16), async_op=True)
    try:
        w.wait()
    except RuntimeError as e:
        assert "rank 1" in str(e), str(e)  # strata names the dead peer
    else:
        raise AssertionError("all_reduce with a dead peer returned")
    assert time.time() - start < 30
    try:
        dist.broadcast(torch.ones(4), src=0)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a later call on a failed group returned")
    os._exit(0)


class StrataBackend(unittest.TestCase):
    def test_reductions_ws2(self):
        spawn(check_reductions, 2)

    def test_reductions_ws3(self):
        spawn(check_reductions, 3)

    def test_reduce_scatter(self):
        spawn(check_reduce_scatter, 3)

    def test_data_movement(self):
        spawn(check_data_movement, 3)

    def test_all_to_all(self):
        spawn(check_all_to_all, 3)

    def test_non_contiguous(self):
        spawn(check_non_contiguous, 2)

    def test_async_and_p2p(self):
        spawn(check_async_and_p2p, 3)

    def test_subgroups(self):
        spawn(check_subgroups, 4)

    def test_errors(self):
        spawn(check_errors, 2)

    def test_init_methods(self):
        spawn(one_all_reduce, 2, init=f"tcp://127.0.0.1:{free_port()}")
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(free_port())
        spawn(one_all_reduce, 2, init="env://")

    def test_timeout_raises(self):
        spawn(silent_peer, 2, timeout_s=3)

    def test_dead_peer_raises(self):
        spawn(dead_peer, 2, timeout_s=20)


if __name__ == "__main__":
    unittest.main(verbosity=2)
