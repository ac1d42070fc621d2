#!/usr/bin/python3
"""test_merge.py: merge_runs (perf/compare --keep): best, worst and median of repeated runs per size."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from compare_lib import parse  # noqa: E402


def table(rows, avg):
    t = parse.Table()
    t.coll, t.avg_busbw = "all_reduce", avg
    for size, time, bus, wrong in rows:
        g = {"time": time, "algbw": size / time / 1e3, "busbw": bus, "wrong": wrong}
        t.rows.append({"size": size, "type": "float", "redop": "sum", "root": -1, "oop": dict(g), "ip": dict(g)})
    return t


class MergeRuns(unittest.TestCase):
    def setUp(self):
        # Three runs of two sizes; run 2 is slow at 1M and has a wrong element at 4K.
        self.runs = [table([(4096, 10.0, 0.4, 0), (1 << 20, 100.0, 10.0, 0)], 5.0),
                     table([(4096, 12.0, 0.3, 1), (1 << 20, 400.0, 2.5, 0)], 1.0),
                     table([(4096, 11.0, 0.35, 0), (1 << 20, 120.0, 8.0, 0)], 4.0)]

    def row(self, merged, size):
        return next(r for r in merged.rows if r["size"] == size)["oop"]

    def test_best_takes_the_fastest_run_per_column(self):
        m = parse.merge_runs(self.runs, "best")
        self.assertEqual(self.row(m, 1 << 20)["time"], 100.0)
        self.assertEqual(self.row(m, 1 << 20)["busbw"], 10.0)
        self.assertEqual(m.avg_busbw, 5.0)
        self.assertEqual(parse.best_of(self.runs).rows, m.rows)

    def test_worst_takes_the_slowest_run_per_column(self):
        m = parse.merge_runs(self.runs, "worst")
        self.assertEqual(self.row(m, 1 << 20)["time"], 400.0)
        self.assertEqual(self.row(m, 1 << 20)["busbw"], 2.5)
        self.assertEqual(self.row(m, 4096)["time"], 12.0)
        self.assertEqual(m.avg_busbw, 1.0)

    def test_median_and_wrong_counts(self):
        m = parse.merge_runs(self.runs, "median")
        self.assertEqual(self.row(m, 1 << 20)["time"], 120.0)
        self.assertEqual(self.row(m, 1 << 20)["busbw"], 8.0)
        for how in ("best", "worst", "median"):  # a wrong element in any run is never hidden
            self.assertEqual(self.row(parse.merge_runs(self.runs, how), 4096)["wrong"], 1)
        self.assertEqual(m.runs, 3)


if __name__ == "__main__":
    unittest.main()
