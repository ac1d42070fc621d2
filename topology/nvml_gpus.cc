// nvml_gpus.cc: the node's GPUs through NVML, loaded at run time with dlopen so that strata has
// no link dependency on the driver. Only the few entry points used are declared here, with the
// layouts of NVIDIA's nvml.h (nvmlPciInfo_t as of the _v3 query, nvmlMemory_t).
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "topology/detect.h"

namespace strata::topology {

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;       // nvmlEnableState_t NVML_FEATURE_ENABLED
constexpr int kNvlinkDeviceTypeGpu = 0x00;   // nvmlIntNvLinkDeviceType_t
constexpr int kNvlinkDeviceTypeSwitch = 0x02;
constexpr unsigned kNvlinkMaxLinks = 18;     // NVML_NVLINK_MAX_LINKS
constexpr unsigned kNameBytes = 96;          // NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct NvmlPciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;  // newer drivers only

  template <typename F>
  bool sym(F* f, const char* s) {
    *f = reinterpret_cast<F>(dlsym(lib, s));
    return *f != nullptr;
  }
  bool open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    bool ok = sym(&init, "nvmlInit_v2") && sym(&shutdown, "nvmlShutdown") &&
              sym(&count, "nvmlDeviceGetCount_v2") && sym(&handle, "nvmlDeviceGetHandleByIndex_v2") &&
              sym(&name, "nvmlDeviceGetName") && sym(&pci, "nvmlDeviceGetPciInfo_v3") &&
              sym(&memory, "nvmlDeviceGetMemoryInfo");
    sym(&linkState, "nvmlDeviceGetNvLinkState");
    sym(&remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(&remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
    return ok;
  }
  ~Nvml() {
    if (lib) dlclose(lib);
  }
};

std::string busIdOf(const NvmlPciInfo& p) {
  return normalizePciBusId(std::string(p.busId, strnlen(p.busId, sizeof(p.busId))));
}

// Active links of the GPU at position `self` in `gpus`: direct peers (GPUs of this node) or
// NVSwitch ports (anything else).
void readNvlinks(Nvml& nv, nvmlDevice_t dev, int self, std::vector<Gpu>* gpus) {
  Gpu& g = (*gpus)[self];
  if (!nv.linkState) return;
  for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
    int state = 0;
    if (nv.linkState(dev, link, &state) != kNvmlSuccess || state != kNvmlFeatureEnabled) continue;
    ++g.nvlinks;
    int type = -1;
    if (nv.remoteType && nv.remoteType(dev, link, &type) == kNvmlSuccess && type == kNvlinkDeviceTypeSwitch) {
      g.nvswitch = true;
      continue;
    }
    NvmlPciInfo remote{};
    if (!nv.remotePci || nv.remotePci(dev, link, &remote) != kNvmlSuccess) continue;
    const std::string bus = busIdOf(remote);
    int peer = -1;
    for (const Gpu& other : *gpus) {
      if (!bus.empty() && other.pciBusId == bus) peer = other.index;
    }
    if (peer >= 0 && peer != g.index) {
      if (std::find(g.nvlinkPeers.begin(), g.nvlinkPeers.end(), peer) == g.nvlinkPeers.end())
        g.nvlinkPeers.push_back(peer);
    } else if (type != kNvlinkDeviceTypeGpu) {
      g.nvswitch = true;  // the far end is not a GPU of this node
    }
  }
  std::sort(g.nvlinkPeers.begin(), g.nvlinkPeers.end());
}

}  // namespace

Status detectNvmlGpus(std::vector<Gpu>* out) {
  out->clear();
  Nvml nv;
  if (!nv.open() || nv.init() != kNvmlSuccess) return OkStatus();
  unsigned n = 0;
  std::vector<nvmlDevice_t> devs;
  if (nv.count(&n) == kNvmlSuccess) {
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t dev = nullptr;
      if (nv.handle(i, &dev) != kNvmlSuccess) continue;  // e.g. no permission: not ours to show
      Gpu g;
      g.index = static_cast<int>(i);
      char name[kNameBytes] = {};
      if (nv.name(dev, name, sizeof(name)) == kNvmlSuccess) g.name = name;
      NvmlPciInfo pci{};
      if (nv.pci(dev, &pci) == kNvmlSuccess) g.pciBusId = busIdOf(pci);
      NvmlMemory mem{};
      if (nv.memory(dev, &mem) == kNvmlSuccess) g.memoryBytes = mem.total;
      out->push_back(g);
      devs.push_back(dev);
    }
    for (size_t k = 0; k < out->size(); ++k) readNvlinks(nv, devs[k], static_cast<int>(k), out);
  }
  nv.shutdown();
  return OkStatus();
}

}  // namespace strata::topology
