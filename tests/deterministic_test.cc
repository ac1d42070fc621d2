// deterministic_test: STRATA_DETERMINISTIC=1 makes reductions bitwise identical across the matrix
// a user can change: forced algorithm (STRATA_ALGO, every family), rank placement (flat on one
// node, or 2x2 / 4x2 / 2x4 / uneven virtual nodes, with tcp between them), rank count, and message
// size (one-shot vs two-shot segmenting). Inputs are floats of widely spread magnitudes and signs,
// so that summation orders differ in the last bits: the test first shows that the default mode's
// algorithms do disagree on them (it could not pass by accident), then that deterministic mode
// equals a balanced tree over the ranks in rank order computed here, element by element.
// Ranks are threads of this process.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectives/comm.h"
#include "strata/strata.h"
#include "support/thread_ranks.h"

namespace {

using strata::testing::runThreadRanks;
using strata::testing::ScopedEnv;

std::string topoFile(const std::string& name) { return std::string(TOPO_FILES_DIR) + "/" + name + ".json"; }

// Rank r's element i: +-(1 + f) * 2^e with e in [-24, 24]: sums of these depend on the order.
template <typename T>
T value(int r, size_t i) {
  uint64_t h = (static_cast<uint64_t>(r) + 1) * 0x9e3779b97f4a7c15ULL ^ (i + 7) * 0xc2b2ae3d27d4eb4fULL;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  const double f = static_cast<double>(h & 0xffffff) / 16777216.0;
  const int e = static_cast<int>((h >> 24) % 49) - 24;
  const double v = std::ldexp(1.0 + f, e) * ((h >> 40) & 1 ? -1.0 : 1.0);
  return static_cast<T>(v);
}

// The deterministic association: a balanced tree over the ranks in rank order.
template <typename T>
T treeSum(int n, size_t i) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) v[static_cast<size_t>(r)] = value<T>(r, i);
  for (int st = 1; st < n; st *= 2)
    for (int k = 0; k + st < n; k += 2 * st) v[static_cast<size_t>(k)] = v[static_cast<size_t>(k)] + v[static_cast<size_t>(k + st)];
  return v[0];
}

struct Outputs {
  std::vector<float> allReduce, reduceScatter, reduce;  // rank 0's (reduce: root 0)
  std::vector<double> allReduce64;
  bool ok = true;
  int nodes = 0;              ///< the communicator's node count (the layout was applied)
  bool deterministic = false;  ///< the communicator's mode
};

// Runs the three reductions on n thread ranks under the current environment.
Outputs run(int n, size_t count) {
  Outputs o;
  std::vector<std::vector<float>> ar(static_cast<size_t>(n)), rs(static_cast<size_t>(n)), rd(static_cast<size_t>(n));
  std::vector<std::vector<double>> ar64(static_cast<size_t>(n));
  std::vector<int> good(static_cast<size_t>(n), 1);
  runThreadRanks(n, [&](strataComm_t comm, int r) {
    if (r == 0) {
      o.nodes = static_cast<strata::Comm*>(comm)->layout().nnodes();
      o.deterministic = static_cast<strata::Comm*>(comm)->deterministic();
    }
    std::vector<float> in(count * static_cast<size_t>(n));
    for (size_t i = 0; i < in.size(); ++i) in[i] = value<float>(r, i);
    std::vector<double> in64(count);
    for (size_t i = 0; i < count; ++i) in64[i] = value<double>(r, i);
    ar[r].assign(count, 0.f);
    rs[r].assign(count, 0.f);
    rd[r].assign(count, 0.f);
    ar64[r].assign(count, 0.0);
    // Reduce-scatter: rank r's block is elements [r*count, (r+1)*count) of the full vector.
    good[r] = strataAllReduce(in.data(), ar[r].data(), count, strataFloat32, strataSum, comm) == strataSuccess &&
              strataReduceScatter(in.data(), rs[r].data(), count, strataFloat32, strataSum, comm) == strataSuccess &&
              strataReduce(in.data(), rd[r].data(), count, strataFloat32, strataSum, 0, comm) == strataSuccess &&
              strataAllReduce(in64.data(), ar64[r].data(), count, strataFloat64, strataSum, comm) == strataSuccess;
  });
  for (int r = 0; r < n; ++r) o.ok = o.ok && good[r];
  for (int r = 1; r < n && o.ok; ++r)
    EXPECT_EQ(std::memcmp(ar[r].data(), ar[0].data(), count * sizeof(float)), 0) << "ranks disagree on all-reduce";
  o.allReduce = ar[0];
  o.reduceScatter = rs[1 % n];  // rank 1's block: elements [count, 2 count)
  o.reduce = rd[0];
  o.allReduce64 = ar64[0];
  return o;
}

struct Layout {
  const char* name;
  int n;
  const char* file;  ///< topology file ("": all ranks on this node)
};

const Layout kLayouts[] = {{"flat4", 4, ""},          {"2x2", 4, "virtual_2x2"}, {"flat8", 8, ""},
                           {"4x2", 8, "virtual_4x2"}, {"2x4", 8, "virtual_2x4"}, {"flat6", 6, ""},
                           {"3x2_uneven", 6, "virtual_3x2_uneven"}};
const char* const kAlgos[] = {"auto", "ring", "rhd", "tree", "direct", "oneshot", "hier"};

size_t mismatches(const std::vector<float>& got, int n, size_t base) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = treeSum<float>(n, base + i);
    bad += std::memcmp(&got[i], &want, sizeof(float)) != 0;
  }
  return bad;
}

TEST(Deterministic, DefaultModeAlgorithmsDisagreeOnTheseInputs) {
  // Without deterministic mode, ring and the tree order give different float sums somewhere.
  ScopedEnv det("STRATA_DETERMINISTIC", "0");
  ScopedEnv algo("STRATA_ALGO", "ring");
  const Outputs o = run(8, 4096);
  ASSERT_TRUE(o.ok);
  EXPECT_FALSE(o.deterministic);
  EXPECT_GT(mismatches(o.allReduce, 8, 0), 0u) << "the inputs do not expose the summation order";
}

class DeterministicMatrix : public ::testing::TestWithParam<size_t> {};

TEST_P(DeterministicMatrix, EveryAlgorithmAndLayoutGivesTheRankOrderTree) {
  const size_t count = GetParam();
  ScopedEnv det("STRATA_DETERMINISTIC", "1");
  for (const Layout& l : kLayouts) {
    ScopedEnv topo("STRATA_TOPO_FILE", *l.file ? topoFile(l.file) : std::string());
    for (const char* a : kAlgos) {
      SCOPED_TRACE(std::string(l.name) + " STRATA_ALGO=" + a + " count " + std::to_string(count));
      ScopedEnv algo("STRATA_ALGO", a);
      const Outputs o = run(l.n, count);
      ASSERT_TRUE(o.ok) << strataGetLastError(nullptr);
      EXPECT_TRUE(o.deterministic);
      EXPECT_EQ(o.nodes > 1, *l.file != '\0') << "the layout was not applied";
      EXPECT_EQ(mismatches(o.allReduce, l.n, 0), 0u) << "all-reduce";
      EXPECT_EQ(mismatches(o.reduceScatter, l.n, count), 0u) << "reduce-scatter (rank 1's block)";
      EXPECT_EQ(mismatches(o.reduce, l.n, 0), 0u) << "reduce";
      size_t bad64 = 0;
      for (size_t i = 0; i < count; ++i) {
        const double want = treeSum<double>(l.n, i);
        bad64 += std::memcmp(&o.allReduce64[i], &want, sizeof(double)) != 0;
      }
      EXPECT_EQ(bad64, 0u) << "all-reduce float64";
    }
  }
}

// 100 elements: one-shot (<= 4 KiB); 50,000: two-shot with uneven segments.
INSTANTIATE_TEST_SUITE_P(Counts, DeterministicMatrix, ::testing::Values(size_t{100}, size_t{50000}));

TEST(Deterministic, ConfigFieldOnOneRankAppliesToAll) {
  // Rank 0 asks through strataConfig_t, the others do not: all use deterministic algorithms.
  ScopedEnv det("STRATA_DETERMINISTIC", "0");
  ScopedEnv algo("STRATA_ALGO", "ring");
  const int n = 4;
  const size_t count = 3000;
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  std::vector<std::vector<float>> out(n);
  std::vector<int> good(n, 0);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      strataConfig_t cfg;
      strataConfigInit(&cfg);
      cfg.deterministic = r == 0 ? 1 : 0;
      strataComm_t comm = nullptr;
      if (strataCommInitRankConfig(&comm, n, id, r, &cfg) != strataSuccess) return;
      std::vector<float> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = value<float>(r, i);
      out[r].assign(count, 0.f);
      good[r] = strataAllReduce(in.data(), out[r].data(), count, strataFloat32, strataSum, comm) == strataSuccess;
      strataCommDestroy(comm);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(good[r]) << "rank " << r;
    EXPECT_EQ(mismatches(out[r], n, 0), 0u) << "rank " << r;
  }
}

}  // namespace
