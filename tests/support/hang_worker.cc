// hang_worker.cc: a job for the hang-report tests, launched by strata-run or by the test itself
// with torchrun-style variables. Every rank runs `rounds` all-reduces; then every rank but `skip`
// starts one more, and `skip` never enters it: it sleeps until it is killed (alarm() bounds it).
// The others fail with STRATA_TIMEOUT and exit 1; their dumps, and `skip`'s when it is asked for
// one (SIGUSR1), must name `skip` as the rank that did not enter.
//
//   hang_worker SKIP ROUNDS [SLEEP_SECONDS]
#include <unistd.h>

#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "strata/strata.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hang_worker SKIP ROUNDS [SLEEP_SECONDS]\n");
    return 2;
  }
  const int skip = std::atoi(argv[1]), rounds = std::atoi(argv[2]);
  const unsigned sleepSec = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 30;
  alarm(sleepSec + 30);
  strataComm_t comm = nullptr;
  if (strataCommInitFromEnv(&comm, nullptr) != strataSuccess) {
    std::fprintf(stderr, "init failed: %s\n", strataGetLastError(nullptr));
    return 3;
  }
  int rank = 0;
  strataCommUserRank(comm, &rank);
  std::vector<float> buf(1024, 1.0f);
  for (int i = 0; i < rounds; ++i)
    if (strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm) != strataSuccess) {
      std::fprintf(stderr, "all-reduce %d failed: %s\n", i, strataGetLastError(comm));
      return 4;
    }
  if (rank == skip) {
    // Never enters the next collective. A signal (the dump request) cuts sleep() short: sleep on.
    const time_t until = time(nullptr) + sleepSec;
    while (time(nullptr) < until) sleep(1);
    return 0;
  }
  if (strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat32, strataSum, comm) == strataSuccess) return 5;
  std::fprintf(stderr, "rank %d: %s\n", rank, strataGetLastError(comm));
  return 1;
}
