#!/usr/bin/env python3
"""Tests of the "strata" backend's PyTorch 2.x surface (a c10d Backend behind a ProcessGroup):
device-qualified backend strings, the CPU-only registration, all_gather_into_tensor /
reduce_scatter_tensor and their coalesced forms, _coalescing_manager blocks, new_subgroups,
sequence numbers, splitting where the running torch lets a third-party backend split, and
shutdown/abort that are idempotent and stop a hung operation (the 2.x-only ones are skipped, with
the reason, on PyTorch 1.x), and async operations that do not block while synchronous ones run on
the waiting thread.

Run: PYTHONPATH=<build>/integrations/pytorch python3 test_backend_v2.py
"""
import os
import sys
import threading
import time
import unittest

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_backend import spawn  # noqa: E402

import strata_torch  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def cpu_backend(group=None):
    return (group or dist.group.WORLD)._get_backend(torch.device("cpu"))


def check_registration(rank, n):
    # init_process_group used "cpu:strata,cuda:gloo": CPU tensors go to strata, CUDA ones never do.
    assert dist.get_backend() == "cpu:strata,cuda:gloo", dist.get_backend()
    assert dist.Backend.backend_capability["strata"] == ["cpu"], dist.Backend.backend_capability["strata"]
    pg = dist.group.WORLD
    assert pg._get_backend(torch.device("cpu")) is not pg._get_backend(torch.device("cuda"))
    assert not strata_torch.is_shut_down(pg)  # the CPU backend is strata's (raises otherwise)
    try:
        strata_torch.is_shut_down(pg._get_backend(torch.device("cuda")))
    except ValueError as e:
        assert "not a strata process group" in str(e), str(e)
    else:
        raise AssertionError("the cuda backend was taken for strata's")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(sum(range(n)))))


def check_tensor_collectives(rank, n):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        inp = torch.arange(6, dtype=dtype) + rank
        out = torch.empty(6 * n, dtype=dtype)
        dist.all_gather_into_tensor(out, inp)
        assert torch.equal(out, torch.cat([torch.arange(6, dtype=dtype) + r for r in range(n)]))
        big = torch.arange(4 * n, dtype=dtype)
        rs = torch.empty(4, dtype=dtype)
        dist.reduce_scatter_tensor(rs, big)
        assert torch.equal(rs, (torch.arange(4, dtype=dtype) + 4 * rank) * n)
    # Coalesced forms, as FSDP and torch's _coalescing_manager issue them.
    outs = [torch.empty(2 * n), torch.empty(5 * n)]
    ins = [torch.full((2,), float(rank)), torch.full((5,), float(rank + 10))]
    with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    assert torch.equal(outs[0], torch.cat([torch.full((2,), float(r)) for r in range(n)]))
    assert torch.equal(outs[1], torch.cat([torch.full((5,), float(r + 10)) for r in range(n)]))
    rs_out = [torch.empty(3), torch.empty(1)]
    rs_in = [torch.arange(3. * n), torch.ones(n)]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for o, i in zip(rs_out, rs_in):
            dist.reduce_scatter_tensor(o, i)
    assert torch.equal(rs_out[0], (torch.arange(3.) + 3 * rank) * n) and torch.equal(rs_out[1], torch.full((1,), 1. * n))
    # Directly on the group: outputs must match inputs one to one.
    try:
        dist.group.WORLD.allgather_into_tensor_coalesced([torch.empty(2 * n)], [torch.ones(2), torch.ones(2)])
    except (RuntimeError, ValueError) as e:
        assert "2 inputs" in str(e), str(e)
    else:
        raise AssertionError("mismatched coalesced lists were accepted")


def check_groups_and_sequence(rank, n):
    sub, subs = dist.new_subgroups(group_size=2)
    t = torch.full((2,), float(rank))
    dist.all_reduce(t, group=sub)
    base = rank - rank % 2
    assert torch.equal(t, torch.full((2,), float(base + base + 1)))
    assert len(subs) == n // 2
    # Sequence numbers: equal on every rank of a group, one more per operation.
    b = cpu_backend()
    s0 = b._get_sequence_number_for_group()
    dist.barrier()
    s1 = b._get_sequence_number_for_group()
    assert s1 == s0 + 1, (s0, s1)
    mine = torch.tensor([s1], dtype=torch.int64)
    everyone = torch.empty(n, dtype=torch.int64)
    dist.all_gather_into_tensor(everyone, mine)
    assert bool((everyone == s1).all()), everyone
    # Splitting: torch versions whose c10d Backend has split() (not 2.6) ask the backend for it
    # through ProcessGroup.split_group(new_ranks), called by the new group's members.
    if b.supports_splitting:
        mine = [0, 1] if rank < 2 else list(range(2, n))
        g = dist.group.WORLD.split_group(mine)
        t = torch.ones(1)
        dist.all_reduce(t, group=g)
        assert t.item() == len(mine), t


def check_shutdown(rank, n):
    g = dist.new_group(list(range(n)))
    t = torch.ones(4)
    dist.all_reduce(t, group=g)
    strata_torch.shutdown(g)
    strata_torch.shutdown(g)  # idempotent
    assert strata_torch.is_shut_down(g)
    try:
        dist.all_reduce(t, group=g)
    except RuntimeError as e:
        assert "shut down" in str(e), str(e)
    else:
        raise AssertionError("an operation on a shut-down group ran")
    dist.all_reduce(t)  # the world is untouched


def check_abort(rank, n):
    """Rank 1 never joins; rank 0 aborts its group from another thread: the hung wait raises at
    once (well before the 60 s timeout), and a second abort is a no-op."""
    g = dist.new_group(list(range(n)), timeout=__import__("datetime").timedelta(seconds=60))
    if rank == 0:
        w = dist.all_reduce(torch.ones(1 << 10), group=g, async_op=True)
        threading.Timer(1.0, lambda: strata_torch.abort(g)).start()
        start = time.time()
        try:
            w.wait()
        except RuntimeError as e:
            assert "abort" in str(e) or "revoked" in str(e) or "shut down" in str(e), str(e)
        else:
            raise AssertionError("the aborted all_reduce returned")
        took = time.time() - start
        assert took < 20, f"abort took {took:.1f} s"
        strata_torch.abort(g)  # idempotent
        assert strata_torch.is_shut_down(g)
    dist.barrier()  # the world is untouched


def check_async_does_not_block(rank, n):
    """async_op=True returns before its peer has even joined, and the operation still progresses
    without a wait (the progress thread runs it); a wait after it completes on the caller."""
    t = torch.ones(1 << 12)
    if rank == 1:
        time.sleep(2.0)
    start = time.time()
    w = dist.all_reduce(t, async_op=True)
    issued = time.time() - start
    if rank == 0:
        assert issued < 1.0, f"async all_reduce took {issued:.2f} s to return"
        assert not w.is_completed()
        deadline = time.time() + 30
        while not w.is_completed():  # completes without anyone waiting on it
            assert time.time() < deadline
            time.sleep(0.01)
    w.wait()
    assert torch.equal(t, torch.full((1 << 12,), float(n)))
    # Synchronous calls back to back (the waiting thread runs them) interleaved with async ones.
    ws = []
    for i in range(50):
        x = torch.full((64,), float(i + rank))
        if i % 3 == 0:
            ws.append((dist.all_reduce(x, async_op=True), x, i))
        else:
            dist.all_reduce(x)
            assert torch.equal(x, torch.full((64,), float(n * i + sum(range(n)))))
    for w, x, i in ws:
        w.wait()
        assert torch.equal(x, torch.full((64,), float(n * i + sum(range(n)))))


@unittest.skipUnless(TORCH2, f"PyTorch {torch.__version__}: the c10d Backend API is PyTorch 2.x's")
class StrataBackendV2(unittest.TestCase):
    def test_registration(self):
        spawn(check_registration, 2, backend="cpu:strata,cuda:gloo")

    def test_tensor_collectives(self):
        spawn(check_tensor_collectives, 3)

    def test_groups_and_sequence(self):
        spawn(check_groups_and_sequence, 4)


class StrataLifecycle(unittest.TestCase):
    def test_shutdown(self):
        spawn(check_shutdown, 2)

    def test_abort(self):
        spawn(check_abort, 2)

    def test_async_does_not_block(self):
        spawn(check_async_does_not_block, 3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
