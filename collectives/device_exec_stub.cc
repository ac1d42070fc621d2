// device_exec_stub.cc: the CUDA path when strata is built without CUDA: every buffer is host
// memory, and nothing is ever enqueued.
#include "collectives/device_exec.h"
#include "transport/shared_buffers.h"

#include <cstdint>
#include <cstdlib>

namespace strata {

struct DeviceState {};

int cudaDeviceCountCached() { return 0; }

Status classifyBuffers(const char*, const void*, const void*, int* device) {
  *device = -1;
  return OkStatus();
}

Status prepareDevice(const std::vector<Comm*>&, const std::vector<int>&) { return OkStatus(); }

Status enqueueDeviceOps(Comm&, const std::vector<DeviceOp>&) {
  return invalidUsage("device buffers need strata built with CUDA (STRATA_ENABLE_CUDA)");
}

Status memAlloc(void** ptr, size_t size) { return allocHostBuffer(ptr, size); }

Status memFree(void* ptr) {
  freeHostBuffer(ptr);
  return OkStatus();
}

int commCudaDevice(Comm&) { return -1; }

void DeviceStateDeleter::operator()(DeviceState* s) const { delete s; }

}  // namespace strata
