// nccl_lib.cc: dlopen / dlsym of NCCL's entry points, and its version.
#include "perf/peers/nccl_lib.h"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>

namespace strata::perf {
namespace {

template <typename F>
bool resolve(void* handle, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!*fn && missing && missing->empty()) *missing = name;
  return *fn != nullptr;
}

// The file behind the handle, resolved through symbolic links where possible.
std::string loadedPath(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name) return fallback;
  char real[PATH_MAX];
  return realpath(map->l_name, real) ? std::string(real) : std::string(map->l_name);
}

// The version code in the X*10000 + Y*100 + Z form.
int normalized(int v) { return v >= 10000 ? v : v / 1000 * 10000 + v / 100 % 10 * 100 + v % 100; }

}  // namespace

std::string NcclLib::versionText() const {
  const int v = normalized(version);
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

bool NcclLib::atLeast(int major, int minor) const { return normalized(version) >= major * 10000 + minor * 100; }

std::string loadNccl(const std::string& path, NcclLib* lib) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed: NCCL keeps threads running
  if (!h) {
    const char* why = dlerror();
    return "cannot load NCCL from " + path + ": " + (why ? why : "dlopen failed") +
           " (give --nccl-lib PATH or STRATA_PERF_NCCL_LIB)";
  }
  lib->path = loadedPath(h, path);
  std::string missing;
  resolve(h, "ncclGetVersion", &lib->getVersion, &missing);
  resolve(h, "ncclGetErrorString", &lib->getErrorString, &missing);
  resolve(h, "ncclGetUniqueId", &lib->getUniqueId, &missing);
  resolve(h, "ncclCommInitRank", &lib->commInitRank, &missing);
  resolve(h, "ncclCommDestroy", &lib->commDestroy, &missing);
  resolve(h, "ncclAllReduce", &lib->allReduce, &missing);
  resolve(h, "ncclReduceScatter", &lib->reduceScatter, &missing);
  resolve(h, "ncclAllGather", &lib->allGather, &missing);
  resolve(h, "ncclBroadcast", &lib->broadcast, &missing);
  resolve(h, "ncclReduce", &lib->reduce, &missing);
  resolve(h, "ncclSend", &lib->send, &missing);
  resolve(h, "ncclRecv", &lib->recv, &missing);
  resolve(h, "ncclGroupStart", &lib->groupStart, &missing);
  resolve(h, "ncclGroupEnd", &lib->groupEnd, &missing);
  if (!missing.empty()) return lib->path + " is not a usable NCCL (2.7 or later): no " + missing;
  resolve(h, "ncclGetLastError", &lib->getLastError, nullptr);
  resolve(h, "ncclCommAbort", &lib->commAbort, nullptr);
  resolve(h, "ncclRedOpCreatePreMulSum", &lib->redOpCreatePreMulSum, nullptr);
  resolve(h, "ncclRedOpDestroy", &lib->redOpDestroy, nullptr);
  if (lib->getVersion(&lib->version) != 0) return lib->path + ": ncclGetVersion failed";
  return "";
}

}  // namespace strata::perf
