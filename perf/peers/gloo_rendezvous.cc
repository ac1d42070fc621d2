// gloo_rendezvous.cc: launcher variables -> file store -> full-mesh tcp context.
#include "perf/peers/gloo_rendezvous.h"

#include <fmt/format.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>

namespace strata::perf {
namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace

std::shared_ptr<gloo::Context> connectGloo(const GlooSetup& setup) {
  if (std::getenv("STRATA_NTHREADS"))
    throw std::runtime_error("Gloo ranks are processes: run under strata-run without --threads");
  const int rank = envInt("STRATA_RANK", 0), size = envInt("STRATA_WORLD_SIZE", 1);
  if (size < 1 || rank < 0 || rank >= size)
    throw std::runtime_error(fmt::format("STRATA_RANK {} / STRATA_WORLD_SIZE {} are not a valid rank", rank, size));
  std::string dir = setup.storeDir;
  const bool ownDir = dir.empty();
  if (ownDir) {
    const char* job = std::getenv("STRATA_UNIQUE_ID");
    if (!job && size > 1) throw std::runtime_error("no STRATA_UNIQUE_ID to name the file store: pass --store DIR");
    const std::string key = job ? job : fmt::format("single-{}", getpid());
    dir = fmt::format("/tmp/strata-gloo-{:016x}", std::hash<std::string>{}(key));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create the file store {}: {}", dir, ec.message()));

  gloo::transport::tcp::attr attr;
  if (setup.iface.empty()) attr.hostname = setup.host;
  else attr.iface = setup.iface;  // e.g. rail0 on a virtual cluster: every rank has its own address
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  try {
    gloo::rendezvous::FileStore store(dir);
    context->connectFullMesh(store, device);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("Gloo rendezvous through {} failed: {}", dir, e.what()));
  }
  gloo::BarrierOptions everyoneConnected(context);
  gloo::barrier(everyoneConnected);
  if (ownDir && rank == 0) std::filesystem::remove_all(dir, ec);
  return context;
}

}  // namespace strata::perf
