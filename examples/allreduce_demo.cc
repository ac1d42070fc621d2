// allreduce_demo.cc: a multi-rank tour of strata through its C++ API. Each rank joins from the
// launch environment, averages a "gradient" across ranks, gathers who is who, then times
// all-reduce over a range of sizes and checks every result.
//
//   strata-run -n 4 -- build/examples/allreduce_demo [--max-bytes 67108864] [--iters 5]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "strata/strata.hpp"

int main(int argc, char** argv) {
  CLI::App app{"strata all-reduce demo: run under strata-run, torchrun or mpirun"};
  size_t maxBytes = 64 << 20;
  int iters = 5;
  app.add_option("--max-bytes", maxBytes, "largest all-reduce to time")->check(CLI::Range(size_t(4), size_t(1) << 32));
  app.add_option("--iters", iters, "timed iterations per size")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  try {
    strata::Communicator comm = strata::Communicator::fromEnv();
    const int rank = comm.rank(), n = comm.size();

    // 1. Data parallelism in one line: average per-rank gradients.
    std::vector<float> grad(8, static_cast<float>(rank + 1));
    comm.allReduce(grad.data(), grad.data(), grad.size(), strataAvg);
    std::printf("rank %d of %d (pid %d): averaged gradient = %.3f (expected %.3f)\n", rank, n, getpid(), grad[0],
                (n + 1) / 2.0);

    // 2. Who is who: all-gather every rank's pid.
    int32_t pid = getpid();
    std::vector<int32_t> pids(static_cast<size_t>(n));
    comm.allGather(&pid, pids.data(), 1);
    if (rank == 0) {
      std::printf("all-gather of pids:");
      for (int32_t p : pids) std::printf(" %d", p);
      std::printf("\n");
    }

    // 3. Timed all-reduce sweep, every result verified.
    if (rank == 0)
      std::printf("%12s %12s %12s %12s %8s\n", "bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check");
    std::vector<float> buf(maxBytes / sizeof(float));
    int failures = 0;
    for (size_t bytes = 4 << 10; bytes <= maxBytes; bytes *= 4) {
      const size_t count = bytes / sizeof(float);
      double best = 1e30;
      bool ok = true;
      for (int it = 0; it < iters + 1; ++it) {
        for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i + rank) % 4);
        comm.barrier();
        auto t0 = std::chrono::steady_clock::now();
        comm.allReduce(buf.data(), buf.data(), count);
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (it > 0) best = std::min(best, us);  // the first iteration is warm-up
        for (size_t i = 0; i < count; i += 97) {
          float expect = 0;
          for (int r = 0; r < n; ++r) expect += static_cast<float>((i + r) % 4);
          ok = ok && buf[i] == expect;
        }
      }
      // Slowest rank defines the collective's time.
      double worst = best;
      comm.allReduce(&best, &worst, 1, strataMax);
      int bad = ok ? 0 : 1, anyBad = 0;
      comm.allReduce(&bad, &anyBad, 1, strataMax);
      failures += anyBad;
      const double algbw = bytes / worst / 1e3;
      if (rank == 0)
        std::printf("%12zu %12.1f %12.2f %12.2f %8s\n", bytes, worst, algbw, algbw * 2.0 * (n - 1) / n,
                    anyBad ? "WRONG" : "ok");
    }
    if (rank == 0) std::printf("%s\n", failures ? "demo FAILED: wrong results" : "demo OK: every result verified");
    return failures ? 1 : 0;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata error: %s\n", e.what());
    return 1;
  }
}
