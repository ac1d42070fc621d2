// soak_test.cc: strata-soak (tools/strata_soak.cc) for a bounded time under strata-run: 4 rank
// processes for 60 s and 3 rank threads for 30 s must finish with every result right (exit 0, the
// summary line with 0 wrong results, 0 hangs, 0 errors and every kind of operation run). Then the
// faults, each a few seconds: a SIGKILLed rank, a rank that aborts its communicators, a rank that
// stops calling (the others' timeout, in collectives and in splits): every other rank must report
// the expected error within seconds of the fault, nobody hangs, and the job exits non-zero; with
// the library's timeout out of reach the soak's watchdog names the stuck step; a result changed on
// purpose must be counted as exactly one wrong result (the checks are not vacuous).
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "support/launcher_run.h"

using namespace strata::testing;

namespace {

const char* const kKinds[] = {"all_reduce",      "reduce_scatter", "all_gather",   "broadcast",
                              "reduce",          "all_to_all",     "gather",       "scatter",
                              "send_recv_shift", "all_to_all_v",   "send_recv_pair", "barrier"};

// The final line's totals; false if there is none.
bool summary(const std::string& out, long long* ops, long long* wrong, long long* hangs, long long* errors) {
  std::smatch m;
  static const std::regex re(
      R"(strata-soak: \d+ ranks, [0-9.]+ s, (\d+) operations \(by collective: [^)]*\), (\d+) wrong results, (\d+) hangs, (\d+) errors)");
  if (!std::regex_search(out, m, re)) return false;
  *ops = std::stoll(m[1]), *wrong = std::stoll(m[2]), *hangs = std::stoll(m[3]), *errors = std::stoll(m[4]);
  return true;
}

void expectCleanRun(const JobRun& r, double seconds) {
  const std::string all = r.out + r.err;
  EXPECT_FALSE(r.limitHit) << all;
  EXPECT_EQ(r.code, 0) << all;
  long long ops = 0, wrong = -1, hangs = -1, errors = -1;
  ASSERT_TRUE(summary(r.out, &ops, &wrong, &hangs, &errors)) << all;
  EXPECT_GT(ops, 100) << all;
  EXPECT_EQ(wrong, 0) << all;
  EXPECT_EQ(hangs, 0) << all;
  EXPECT_EQ(errors, 0) << all;
  for (const char* k : kKinds)  // every kind ran at least once
    EXPECT_TRUE(std::regex_search(r.out, std::regex(std::string("[(, ]") + k + " [1-9]"))) << k << "\n" << r.out;
  EXPECT_EQ(all.find("WRONG"), std::string::npos) << all;
  EXPECT_EQ(all.find("HANG"), std::string::npos) << all;
  EXPECT_LT(r.seconds, seconds + 60) << all;
}

TEST(Soak, FourProcesses) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "4", "--", SOAK_BIN, "--seconds", "60", "--op-timeout", "30"}, 240);
  expectCleanRun(r, 60);
}

TEST(Soak, ThreeThreadRanks) {
  JobRun r = runJob({STRATA_RUN_BIN, "--threads", "-n", "3", "--", SOAK_BIN, "--seconds", "30", "--op-timeout", "30"},
                    180);
  expectCleanRun(r, 30);
}

// A fault run: the victim's announcement, every other rank's "got the expected error" no later
// than `within` seconds after the fault was due, no hang, a failed job.
void expectCleanFailure(const JobRun& r, int ranks, int victim, const std::string& announce, double within) {
  const std::string all = r.out + r.err;
  EXPECT_FALSE(r.limitHit) << all;
  EXPECT_NE(r.code, 0) << all;
  EXPECT_EQ(all.find("HANG"), std::string::npos) << all;
  EXPECT_EQ(all.find("WRONG"), std::string::npos) << all;
  EXPECT_NE(r.out.find("strata-soak: rank " + std::to_string(victim) + ": fault injection: " + announce),
            std::string::npos)
      << all;
  for (int k = 0; k < ranks; ++k) {
    if (k == victim) continue;
    std::smatch m;
    const std::regex re("strata-soak: rank " + std::to_string(k) +
                        R"(: got the expected error after [0-9.]+ s \((-?[0-9.]+) s after the fault was due\))");
    ASSERT_TRUE(std::regex_search(r.out, m, re)) << "rank " << k << " did not report the error\n" << all;
    EXPECT_LT(std::stod(m[1]), within) << "rank " << k << "\n" << all;
  }
}

TEST(Soak, KilledRankFailsTheJobCleanly) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "4", "--", SOAK_BIN, "--seconds", "30", "--faults", "kill",
                     "--fault-rank", "2", "--fault-after", "3", "--op-timeout", "20", "--hang-seconds", "30"},
                    90);
  expectCleanFailure(r, 4, 2, "SIGKILL", 5);
  EXPECT_EQ(r.code, 128 + 9) << r.out << r.err;  // strata-run passes on the victim's death
}

TEST(Soak, AbortingThreadRankFailsTheOthers) {
  JobRun r = runJob({STRATA_RUN_BIN, "--threads", "-n", "3", "--", SOAK_BIN, "--seconds", "30", "--faults", "abort",
                     "--fault-rank", "1", "--fault-after", "3", "--op-timeout", "20", "--hang-seconds", "30"},
                    90);
  expectCleanFailure(r, 3, 1, "aborts its communicators", 5);
  EXPECT_EQ(r.code, 10) << r.out << r.err;
}

TEST(Soak, StalledRankTimesTheOthersOut) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "3", "--", SOAK_BIN, "--seconds", "30", "--faults", "stall", "--fault-rank",
                     "0", "--fault-after", "3", "--op-timeout", "3", "--hang-seconds", "20"},
                    90);
  expectCleanFailure(r, 3, 0, "stops calling strata", 3 + 5);
  EXPECT_NE((r.out + r.err).find("no progress for 3 s"), std::string::npos) << r.out << r.err;
}

// The same with a split family re-created at every step: the others wait for the stalled rank in
// strataCommSplit as often as in a collective, and a split waits no longer than a collective.
TEST(Soak, StalledRankTimesTheOthersOutOfSplits) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "3", "--", SOAK_BIN, "--seconds", "30", "--faults", "stall", "--fault-rank",
                     "0", "--fault-after", "2", "--op-timeout", "3", "--hang-seconds", "20", "--resplit-per-mille",
                     "1000"},
                    90);
  expectCleanFailure(r, 3, 0, "stops calling strata", 2 + 5);
  EXPECT_NE((r.out + r.err).find("no progress for 3 s"), std::string::npos) << r.out << r.err;
}

// The library's timeout set far away: the soak's own watchdog must name the stuck step and end
// the job (exit 3), and strata-run's hang report follows. The others wait either in the step the
// stalled rank never enters or, when the stall falls on one, in the stop check between steps.
TEST(Soak, WatchdogReportsAStuckStep) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "3", "--", SOAK_BIN, "--seconds", "30", "--faults", "stall", "--fault-rank",
                     "1", "--fault-after", "2", "--op-timeout", "60", "--hang-seconds", "4"},
                    90);
  const std::string all = r.out + r.err;
  EXPECT_FALSE(r.limitHit) << all;
  EXPECT_EQ(r.code, 3) << all;
  const std::regex hang(
      R"(strata-soak: rank [02]: HANG: (step #\d+ .*|stop check after step #\d+) has not returned after [0-9.]+ s)");
  EXPECT_TRUE(std::regex_search(r.err, hang)) << all;
  EXPECT_NE(r.err.find("strata-run: hang report from"), std::string::npos) << all;
  EXPECT_LT(r.seconds, 40) << all;
}

TEST(Soak, ChangedResultIsCounted) {
  JobRun r = runJob({STRATA_RUN_BIN, "-n", "3", "--", SOAK_BIN, "--seconds", "6", "--faults", "corrupt",
                     "--fault-rank", "1", "--fault-after", "2"},
                    90);
  const std::string all = r.out + r.err;
  EXPECT_EQ(r.code, 1) << all;
  long long ops = 0, wrong = -1, hangs = -1, errors = -1;
  ASSERT_TRUE(summary(r.out, &ops, &wrong, &hangs, &errors)) << all;
  EXPECT_EQ(wrong, 1) << all;
  EXPECT_EQ(errors, 0) << all;
  EXPECT_NE(r.err.find("strata-soak: rank 1: WRONG RESULT"), std::string::npos) << all;
}

}  // namespace
