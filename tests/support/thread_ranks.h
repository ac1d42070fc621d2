// thread_ranks.h: runs a function on n ranks that are threads of this process (communicators from
// strataCommInitAll), and sets strata's environment configuration for the duration of a test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"
#include "transport/config.h"

namespace strata::testing {

/// Creates n thread ranks, runs fn(comm, rank) on each in its own thread, destroys the comms.
inline void runThreadRanks(int n, const std::function<void(strataComm_t, int)>& fn) {
  std::vector<strataComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(strataCommInitAll(comms.data(), n), strataSuccess) << strataGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(comms[r], r); });
  for (auto& t : threads) t.join();
  for (strataComm_t c : comms) strataCommDestroy(c);
}

/// Sets an environment variable for the scope and reloads strata's configuration.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value.c_str(), 1);
    EXPECT_TRUE(reloadConfig().ok());
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
    (void)reloadConfig();
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace strata::testing
