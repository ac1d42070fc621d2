#!/usr/bin/env python3
"""Runs PyTorch's own distributed test suite (DistributedTest._DistTestBase, as PyTorch's
test_distributed_spawn.py drives it) on one backend and world size, and writes one line per test:
`<name> <pass|fail|skip|error>`.

    run_dist_suite.py --backend strata --world-size 2 --out results.txt [-k PATTERN ...]

With --expect FILE, exits non-zero when a test listed there as passing does not pass now.
The backend "strata" is registered by importing strata_torch (PYTHONPATH must reach it) and is
added to the suite's plugin, ddp and subgroup feature sets, and to the backends that do not
support receiving from any source.
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
    return p.parse_known_args()[0]


# The suite reads BACKEND and WORLD_SIZE at import, in the parent and in every spawned child (which
# re-imports this file as __mp_main__), so they are set before torch's test modules load.
if __name__ == "__main__":
    _args = _parse()
    os.environ["BACKEND"] = _args.backend
    os.environ["WORLD_SIZE"] = str(_args.world_size)
    os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="strata-dist-suite-"))

if os.environ.get("BACKEND") == "strata":
    import strata_torch  # noqa: F401  (registers the backend)

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
    print(f"{args.backend} world size {args.world_size}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.expect:
        with open(args.expect) as f:
            expected = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
        missing = [n for n in expected if n in result.outcomes and result.outcomes[n] != "pass"]
        absent = [n for n in expected if n not in result.outcomes and (not args.k or any(k in n for k in args.k))]
        for n in missing:
            print(f"expected to pass, got {result.outcomes[n]}: {n}")
        for n in absent:
            print(f"expected to pass, not run: {n}")
        return 1 if missing or absent else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
