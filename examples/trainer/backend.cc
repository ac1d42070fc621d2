// backend.cc: choosing a lane: the thread's current one, and the factory behind --device.
#include <fmt/format.h>

#include "backend.h"
#ifdef STRATA_TRAINER_CUDA
#include "backend_cuda.h"
#endif

namespace trainer {

namespace {
thread_local Ops* tCurrent = nullptr;
}

Ops& currentOps() { return tCurrent ? *tCurrent : hostOps(); }

UseOps::UseOps(Ops* ops) : prev_(tCurrent) {
  tCurrent = ops;
  if (ops) ops->bindThread();
}
UseOps::~UseOps() { tCurrent = prev_; }

std::string deviceUnavailable(Device device) {
  if (device == Device::Host) return "";
#ifdef STRATA_TRAINER_CUDA
  std::string why;
  if (cudaDevices(&why) > 0) return "";
  return "--device cuda: no CUDA device (" + why + ")";
#else
  return "--device cuda: this strata-train was built without CUDA (configure with -DSTRATA_ENABLE_CUDA=ON "
         "where nvcc and cuBLAS are installed)";
#endif
}

std::unique_ptr<Ops> makeOps(Device device, int localRank) {
  if (std::string why = deviceUnavailable(device); !why.empty()) throw std::runtime_error(why);
  if (device == Device::Host) return makeHostOps();
#ifdef STRATA_TRAINER_CUDA
  return makeCudaOps(localRank);
#else
  (void)localRank;
  return nullptr;
#endif
}

}  // namespace trainer
