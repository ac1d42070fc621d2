// launcher_bootstrap_helper: joins the job's bootstrap (STRATA_UNIQUE_ID, served by strata-run's
// persistent root) twice in a row, all-gathers the ranks each time and prints
// "round K ok rank R of N". As processes (STRATA_RANK) or, under --threads, as STRATA_NTHREADS
// threads of this process. Exits 1 on any error.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "topology/host_identity.h"
#include "transport/bootstrap.h"

namespace {

bool runRank(const strataUniqueId& id, int rank, int nranks) {
  for (int round = 0; round < 2; ++round) {
    strata::RankInfo self;
    self.rank = rank;
    self.pid = getpid();
    self.hostHash = strata::topology::hostHash();
    self.processHash = strata::topology::processHash();
    std::unique_ptr<strata::Bootstrap> b;
    strata::Status st = strata::Bootstrap::join(id, rank, nranks, self, 30, &b);
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d round %d: join failed: %s\n", rank, round, st.message().c_str());
      return false;
    }
    std::vector<int> all(static_cast<size_t>(nranks), -1);
    int mine = rank * 10 + round;
    st = b->allGather(&mine, all.data(), sizeof(int));
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d round %d: allgather failed: %s\n", rank, round, st.message().c_str());
      return false;
    }
    for (int r = 0; r < nranks; ++r)
      if (all[static_cast<size_t>(r)] != r * 10 + round) {
        std::fprintf(stderr, "rank %d round %d: wrong allgather value from rank %d\n", rank, round, r);
        return false;
      }
    std::string line = "round " + std::to_string(round) + " ok rank " + std::to_string(rank) + " of " +
                       std::to_string(nranks) + "\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
  return true;
}

}  // namespace

int main() {
  const char* hex = std::getenv("STRATA_UNIQUE_ID");
  const char* size = std::getenv("STRATA_WORLD_SIZE");
  strataUniqueId id;
  if (!hex || !size || !strata::uniqueIdFromHex(hex, &id)) {
    std::fprintf(stderr, "launcher_bootstrap_helper: STRATA_UNIQUE_ID / STRATA_WORLD_SIZE missing or bad\n");
    return 1;
  }
  const int nranks = std::atoi(size);
  if (const char* nt = std::getenv("STRATA_NTHREADS")) {
    const int nthreads = std::atoi(nt);
    std::vector<std::thread> threads;
    std::vector<char> ok(static_cast<size_t>(nthreads), 0);
    for (int r = 0; r < nthreads; ++r) threads.emplace_back([&, r] { ok[static_cast<size_t>(r)] = runRank(id, r, nranks); });
    for (auto& t : threads) t.join();
    for (char o : ok)
      if (!o) return 1;
    return 0;
  }
  const char* rank = std::getenv("STRATA_RANK");
  if (!rank) {
    std::fprintf(stderr, "launcher_bootstrap_helper: STRATA_RANK missing\n");
    return 1;
  }
  return runRank(id, std::atoi(rank), nranks) ? 0 : 1;
}
