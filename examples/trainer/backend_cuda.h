// backend_cuda.h: the CUDA lane's entry points (backend_cuda.cu, built with STRATA_ENABLE_CUDA).
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace trainer {

/// CUDA devices this process sees; on 0, `why` says what the runtime answered.
int cudaDevices(std::string* why);
/// A lane on device localRank % devices with its own stream and cuBLAS handle.
std::unique_ptr<Ops> makeCudaOps(int localRank);

}  // namespace trainer
