// device_exec.h: the CUDA path of the executor. Tells host from device buffers, sets up a
// communicator's device connections on first use (FIFO arenas in device memory, exchanged through
// the bootstrap: direct pointers between ranks that are threads of one process, CUDA IPC between
// processes of one machine; several ranks may share one GPU), and enqueues planned kernels on the
// caller's CUDA streams with NCCL's ordering: a call (or a group, at its end) enqueues and
// returns; a communicator's operations run in call order even across streams; nothing blocks the
// host, so CUDA graph capture works. A watchdog thread turns aborts, dead peers and timeouts into
// a raised abort flag that every kernel wait checks, and into the communicator's async error.
// Built from device_exec.cc where CUDA is enabled, else from device_exec_stub.cc.
#pragma once

#include <vector>

#include "collectives/task.h"
#include "transport/status.h"

namespace strata {

class Comm;

/// CUDA devices this process can use: 0 without the CUDA build, a driver or a device. Cached.
int cudaDeviceCountCached();

/// Where a call's buffers live: *device is the CUDA device ordinal of device (or managed) memory,
/// -1 for host memory. Null buffers are ignored; both null means host. Fails when one buffer is
/// device memory and the other host memory, or they are on different devices.
Status classifyBuffers(const char* what, const void* a, const void* b, int* device);

/// strataMemAlloc / strataMemFree: device memory where CUDA devices exist, else page-aligned host.
Status memAlloc(void** ptr, size_t size);
Status memFree(void* ptr);
/// The device a communicator's device work runs on (see strataCommCudaDevice).
int commCudaDevice(Comm& c);

/// One device operation as queued by the API.
struct DeviceOp {
  bool isColl = true;
  CollCall coll;
  P2PCall p2p;
  void* stream = nullptr;  ///< cudaStream_t
  int device = 0;          ///< CUDA device of the buffers
};

/// Sets up the device connections of every communicator in `comms` that has none yet, on the
/// device of the same index in `devices`, concurrently (one thread may drive several ranks).
/// Collective per communicator.
Status prepareDevice(const std::vector<Comm*>& comms, const std::vector<int>& devices);
/// Enqueues one communicator's device operations (call order) on their streams.
Status enqueueDeviceOps(Comm& c, const std::vector<DeviceOp>& ops);

/// Per-communicator device state, owned by the Comm (freed by its destructor).
struct DeviceState;
struct DeviceStateDeleter {
  void operator()(DeviceState* s) const;
};

}  // namespace strata
