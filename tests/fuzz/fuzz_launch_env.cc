// fuzz_launch_env: the launchers' variables (collectives/launch_env.cc, parseLaunchVars: what
// strataCommInitFromEnv reads from strata-run, torchrun, mpirun and srun), Slurm node lists
// included (firstSlurmHost). Input: the first byte is STRATA_ROOT_PORT's value (0: unset, else
// 1..255 as parsed by the configuration), then one variable per line, its first byte choosing
// the variable, the rest its value. Whatever the values, the result is a clean error or a rank in
// [0, size), a root host with no list syntax left in it and a port in 1..65535.
#include <map>

#include "collectives/launch_env.h"
#include "fuzz_util.h"

namespace {

const char* const kVars[] = {"STRATA_UNIQUE_ID",  // passed as the configuration's value
                             "STRATA_RANK",         "STRATA_WORLD_SIZE",       "RANK",
                             "WORLD_SIZE",          "MASTER_ADDR",             "MASTER_PORT",
                             "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK",    "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE",   "OMPI_MCA_ess_base_jobid",
                             "SLURM_PROCID",        "SLURM_NTASKS",            "SLURM_JOB_ID",
                             "SLURM_STEP_ID",       "SLURM_STEP_NODELIST"};
constexpr size_t kNumVars = sizeof(kVars) / sizeof(kVars[0]);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const int rootPort = in.take<uint8_t>();
  std::map<std::string, std::string> env;
  while (in.left()) {
    const std::string line = in.line();
    if (line.empty()) continue;
    env[kVars[static_cast<uint8_t>(line[0]) % kNumVars]] = line.substr(1);
  }
  const std::string uniqueId = env.count("STRATA_UNIQUE_ID") ? env["STRATA_UNIQUE_ID"].c_str() : "";
  strata::LaunchVars v;
  const strata::Status st = strata::parseLaunchVars(
      [&](const char* name) {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      uniqueId, rootPort, &v);
  if (env.count("SLURM_STEP_NODELIST")) {
    const std::string list = env["SLURM_STEP_NODELIST"].c_str();
    const std::string first = strata::firstSlurmHost(list);
    FUZZ_CHECK(first.size() <= list.size(), "'%s' -> '%s'", list.c_str(), first.c_str());
    FUZZ_CHECK(first.find_first_of("[,") == std::string::npos, "'%s' -> '%s'", list.c_str(), first.c_str());
  }
  if (!st.ok()) {
    FUZZ_CHECK(!st.message().empty(), "an error without a message");
    return 0;
  }
  FUZZ_CHECK(v.nranks >= 1 && v.rank >= 0 && v.rank < v.nranks, "rank %d of %d", v.rank, v.nranks);
  if (!v.haveId) {
    FUZZ_CHECK(!v.host.empty() && v.port >= 1 && v.port <= 65535, "root '%s' port %d", v.host.c_str(), v.port);
    if (!env.count("MASTER_ADDR") || env["MASTER_ADDR"].c_str()[0] == '\0')
      FUZZ_CHECK(v.host.find_first_of("[,") == std::string::npos, "root host '%s'", v.host.c_str());
  }
  return 0;
}
