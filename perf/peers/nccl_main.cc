// nccl_main.cc: main() of the NVIDIA NCCL peer tools (nccl_all_reduce_perf, ...): the strata tools'
// sweep and output on device memory, measuring the NCCL that --nccl-lib names (dlopen'ed; no NCCL
// header or library at build time). Ranks start like strata's tools, over a strata host communicator.
//
//   build/tools/strata-run -n 4 -- build/perf/nccl_all_reduce_perf -b 8 -e 1G -f 2
//   build/tools/strata-run -n 2 -- build/perf/nccl_all_reduce_perf --nccl-lib /opt/nccl/lib/libnccl.so.2
//   build/tools/strata-run -n 2 -- build/perf/nccl_all_reduce_perf --memory host --nccl-lib PATH
//       (host buffers: for an NCCL that takes them, i.e. strata's build/collectives/libnccl.so.2)
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "perf/common/tool.h"
#include "perf/peers/nccl_backend.h"
#include "perf/strata/strata_launch.h"

namespace {

strata::perf::NcclLib lib;
std::string libPath;

void addNcclOptions(CLI::App& app) {
  app.add_option("--nccl-lib", libPath,
                 "the NCCL library to measure (default: $STRATA_PERF_NCCL_LIB, else libnccl.so.2 from the loader's "
                 "search path)")
      ->type_name("PATH");
}

std::string loadLibrary(const strata::perf::Options&) {
  std::string path = libPath;
  const char* env = std::getenv("STRATA_PERF_NCCL_LIB");
  if (path.empty()) path = env && *env ? env : "libnccl.so.2";
  return strata::perf::loadNccl(path, &lib);
}

int launchNcclRanks(const strata::perf::Options& o, const strata::perf::RankBody& body) {
  using namespace strata::perf;
  return launchStrataRanks(o, [&](Backend& host, int nprocs, int thread) {
    NcclBackend nccl(lib, host);
    const int rc = body(nccl, nprocs, thread);
    nccl.close(rc == kExitError);
    return rc;
  });
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata::perf;
  const ToolInfo tool{Coll::PERF_COLL, PERF_TOOL_NAME, "NCCL",
                      "Launch: strata-run -n N -- " PERF_TOOL_NAME " [flags] (or mpirun, torchrun, srun), exactly\n"
                      "like strata's tools: a strata host communicator carries the rendezvous (rank 0's\n"
                      "ncclUniqueId), barriers and timing. Device memory (the default): each rank uses GPU local rank %\n"
                      "GPUs. Ranks sharing a GPU need NCCL 2.30+ (the tool then sets NCCL_MULTI_RANK_GPU_ENABLE=1\n"
                      "unless it is set). all-to-all, gather, scatter and send/recv are grouped ncclSend/ncclRecv;\n"
                      "in place, all-to-all and send/recv copy their input aside first. --memory host measures an\n"
                      "NCCL that takes host buffers (strata's libnccl.so.2: an NCCL program on malloc'd memory).",
                      addNcclOptions,
                      {"device", "host"},
                      loadLibrary};
  return toolMain(argc, argv, tool, launchNcclRanks);
}
