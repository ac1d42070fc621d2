// watchdog.h: ends a hung GPU test after a deadline, printing what every rank was doing (a hang is a failure).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace strata::testing {

class Watchdog {
 public:
  Watchdog(double seconds, std::function<std::string()> describe)
      : thread_([this, seconds, describe = std::move(describe)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
          std::fprintf(stderr, "watchdog: not finished after %.0f s (hung?), giving up:\n%s\n", seconds,
                       describe().c_str());
          std::fflush(stderr);
          std::_Exit(3);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace strata::testing
