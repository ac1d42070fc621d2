#!/usr/bin/env python3
"""Runs PyTorch's own distributed test suite (DistributedTest._DistTestBase, as PyTorch's
test_distributed_spawn.py drives it) on one backend and world size, and writes one line per test:
`<name> <pass|fail|skip|error>`.

    run_dist_suite.py --backend strata --world-size 2 --out results.txt [-k PATTERN ...]

With --expect FILE, runs the tests listed there (one name per line, `#` comments) and exits
non-zero unless every one passes.
The backend "strata" is registered by importing strata_torch (PYTHONPATH must reach it) and is
added to the suite's plugin, ddp and subgroup feature sets, and to the backends that do not
support receiving from any source.

Many tests are gated on the name "gloo" (get_future, coalesced all-reduce, object collectives,
batched send/recv, barrier timeouts). --pose-as-gloo runs the suite with BACKEND=gloo while every
process group the tests create (default group and new_group) is a strata one: that runs those
gated tests on strata too. Tests that check for the ProcessGroupGloo type fail in this mode by
construction.
"""
import argparse
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "stubs"))  # expecttest stand-in


def _parse():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default=os.environ.get("BACKEND", "strata"))
    p.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "2")))
    p.add_argument("--out", help="write `<test> <outcome>` lines here")
    p.add_argument("--expect", help="file of tests expected to pass; fail if one does not")
    p.add_argument("-k", action="append", default=[], help="run tests whose name contains this (repeatable)")
    p.add_argument("--list", action="store_true", help="list the tests and exit")
    p.add_argument("--pose-as-gloo", action="store_true", help="BACKEND=gloo, but every group is strata")
    return p.parse_known_args()[0]


# The suite reads BACKEND and WORLD_SIZE at import, in the parent and in every spawned child (which
# re-imports this file as __mp_main__), so they are set before torch's test modules load.
if __name__ == "__main__":
    _args = _parse()
    os.environ["BACKEND"] = "gloo" if _args.pose_as_gloo else _args.backend
    if _args.pose_as_gloo:
        os.environ["STRATA_POSE_AS_GLOO"] = "1"
    os.environ["WORLD_SIZE"] = str(_args.world_size)
    os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="strata-dist-suite-"))

if os.environ.get("BACKEND") == "strata" or os.environ.get("STRATA_POSE_AS_GLOO") == "1":
    import strata_torch  # noqa: F401  (registers the backend)

if os.environ.get("STRATA_POSE_AS_GLOO") == "1":
    import torch.distributed as _dist

    def _strata_for_gloo(fn):
        def wrapped(*a, **kw):
            if kw.get("backend") in ("gloo", _dist.Backend.GLOO):
                kw["backend"] = "strata"
            elif a and fn is _init and a[0] in ("gloo", _dist.Backend.GLOO):
                a = ("strata",) + tuple(a[1:])
            return fn(*a, **kw)
        return wrapped

    _init = _dist.init_process_group
    _dist.init_process_group = _strata_for_gloo(_dist.init_process_group)
    _dist.new_group = _strata_for_gloo(_dist.new_group)

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

DistTestCases.backend_feature["plugin"].add("strata")
DistTestCases.backend_feature["ddp"].add("strata")
DistTestCases.backend_feature["subgroup"].add("strata")
DistTestCases.skip_collective["sendrecv anysource"].add("strata")

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Outcomes(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}

    def _name(self, test):
        return test.id().rsplit(".", 1)[-1]

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[self._name(test)] = "pass"

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[self._name(test)] = "fail"

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[self._name(test)] = "error"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[self._name(test)] = "skip"

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcomes[self._name(test)] = "pass"

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes[self._name(test)] = "fail"


def main():
    args = _args
    names = sorted(n for n in unittest.defaultTestLoader.getTestCaseNames(TestDistBackendWithSpawn))
    expected = []
    if args.expect:  # run exactly the tests expected to pass
        with open(args.expect) as f:
            expected = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
        unknown = sorted(set(expected) - set(names))
        if unknown:
            print("not in this PyTorch's suite: " + " ".join(unknown))
            return 1
        names = [n for n in names if n in set(expected)]
    if args.k:
        names = [n for n in names if any(k in n for k in args.k)]
    if args.list:
        print("\n".join(names))
        return 0
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=_Outcomes, verbosity=2, stream=sys.stderr)
    result = runner.run(suite)
    lines = [f"{n} {result.outcomes.get(n, 'error')}" for n in names]
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    counts = {}
    for n in names:
        o = result.outcomes.get(n, "error")
        counts[o] = counts.get(o, 0) + 1
    label = "strata posing as gloo" if args.pose_as_gloo else args.backend
    print(f"{label} world size {args.world_size}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.expect:
        failed = [n for n in names if result.outcomes.get(n) != "pass"]
        for n in failed:
            print(f"expected to pass, got {result.outcomes.get(n, 'error')}: {n}")
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
