// launch_env.cc: launcher environment variables -> rank, size, root address, unique id.
#include "collectives/launch_env.h"

#include <arpa/inet.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "topology/host_identity.h"
#include "transport/bootstrap.h"
#include "transport/config.h"
#include "transport/log.h"
#include "transport/secret.h"
#include "transport/socket.h"

namespace strata {
namespace {

bool parseInt(const char* s, int* out) {
  if (!s) return false;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 0 || v > (1 << 30)) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string firstSlurmHost(const std::string& list) {
  // Each bracket contributes the first number of its first range; text around and between
  // brackets is kept ("rack[1-2]-node[01-04]" -> "rack1-node01").
  std::string h;
  for (size_t i = 0; i < list.size() && list[i] != ','; ++i) {
    if (list[i] != '[') {
      h += list[i];
      continue;
    }
    size_t j = i + 1;
    while (j < list.size() && list[j] != '-' && list[j] != ',' && list[j] != ']' && list[j] != '[') h += list[j++];
    i = list.find(']', j);
    if (i == std::string::npos) break;  // unterminated: what it has
  }
  return h;
}

Status parseLaunchVars(const std::function<const char*(const char*)>& lookup, const std::string& uniqueId,
                       int rootPort, LaunchVars* out) {
  auto env = [&](const char* name) -> const char* {
    const char* v = lookup(name);
    return (v && *v) ? v : nullptr;
  };
  if (!uniqueId.empty() && env("STRATA_RANK") && env("STRATA_WORLD_SIZE")) {
    out->source = "strata-run";
    if (!parseInt(env("STRATA_RANK"), &out->rank) || !parseInt(env("STRATA_WORLD_SIZE"), &out->nranks))
      return invalidArgument("STRATA_RANK / STRATA_WORLD_SIZE are not integers");
    if (out->nranks < 1 || out->rank >= out->nranks)
      return invalidArgument("strata-run environment gives rank {} of {}", out->rank, out->nranks);
    if (!uniqueIdFromHex(uniqueId, &out->id)) return invalidArgument("STRATA_UNIQUE_ID is not a valid strata id");
    out->haveId = true;
    return OkStatus();
  }
  std::string& jobKey = out->jobKey;
  std::string& host = out->host;
  if (env("RANK") && env("WORLD_SIZE")) {
    out->source = "torchrun";
    parseInt(env("RANK"), &out->rank);
    parseInt(env("WORLD_SIZE"), &out->nranks);
    jobKey = std::string(env("TORCHELASTIC_RUN_ID") ? env("TORCHELASTIC_RUN_ID") : "");
  } else if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) {
    out->source = "mpirun";
    parseInt(env("OMPI_COMM_WORLD_RANK"), &out->rank);
    parseInt(env("OMPI_COMM_WORLD_SIZE"), &out->nranks);
    const char* ns = env("PMIX_NAMESPACE") ? env("PMIX_NAMESPACE") : env("OMPI_MCA_ess_base_jobid");
    jobKey = ns ? ns : "";
    const char* local = env("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (local && std::strcmp(local, env("OMPI_COMM_WORLD_SIZE")) == 0) host = "127.0.0.1";
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    out->source = "srun";
    parseInt(env("SLURM_PROCID"), &out->rank);
    parseInt(env("SLURM_NTASKS"), &out->nranks);
    jobKey = std::string(env("SLURM_JOB_ID") ? env("SLURM_JOB_ID") : "") + "." +
             (env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : "");
    if (env("SLURM_STEP_NODELIST")) host = firstSlurmHost(env("SLURM_STEP_NODELIST"));
  } else {
    return invalidArgument(
        "no launch environment found: run under strata-run, torchrun (RANK, WORLD_SIZE, MASTER_ADDR, "
        "MASTER_PORT), mpirun or srun");
  }
  if (out->nranks < 1 || out->rank < 0 || out->rank >= out->nranks)
    return invalidArgument("{} environment gives rank {} of {}", out->source, out->rank, out->nranks);
  if (env("MASTER_ADDR")) host = env("MASTER_ADDR");
  if (host.empty())
    return invalidArgument("{}: cannot tell where rank 0 is; set MASTER_ADDR and MASTER_PORT", out->source);
  int& port = out->port;
  if (rootPort) port = rootPort;
  else if (env("MASTER_PORT")) parseInt(env("MASTER_PORT"), &port);
  // Below Linux's ephemeral range (32768+), so an outgoing connection cannot hold the port.
  else port = 20000 + static_cast<int>(topology::hashBytes(jobKey.data(), jobKey.size()) % 12000);
  if (port <= 0 || port > 65535) return invalidArgument("root port {} is out of range", port);
  return OkStatus();
}

Status readLaunchEnv(LaunchInfo* out) {
  const Config& cfg = config();
  LaunchVars v;
  STRATA_RETURN_IF_ERROR(parseLaunchVars([](const char* name) { return std::getenv(name); }, cfg.uniqueId,
                                         cfg.rootPort, &v));
  out->source = v.source;
  out->rank = v.rank;
  out->nranks = v.nranks;
  if (v.haveId) {
    out->id = v.id;
    return OkStatus();
  }
  const std::string& host = v.host;
  const std::string& jobKey = v.jobKey;
  const int port = v.port;

  UniqueIdData d;
  STRATA_RETURN_IF_ERROR(net::resolveHost(host, &d.rootAddr));
  d.rootPort = htons(static_cast<uint16_t>(port));
  // No channel exists to hand out a random secret: every rank computes it from the job's values.
  // Those are public (any local user can see the job id, root address, port and rank count), so
  // the user's secret (STRATA_SECRET / STRATA_SECRET_FILE) is mixed in when there is one.
  std::string seed = fmt::format("{}|{}|{}|{}", jobKey, host, port, out->nranks);
  uint64_t h1 = topology::hashBytes(seed.data(), seed.size()), h2 = topology::hashBytes(seed.data(), seed.size(), h1);
  d.commTag = h1 ^ h2;
  std::string user;
  bool haveUser = false;
  STRATA_RETURN_IF_ERROR(userSecret(&user, &haveUser));
  if (haveUser) {
    uint8_t mac[32];
    hmacSha256(user, "strata-rendezvous|" + seed, mac);
    std::memcpy(d.secret, mac, sizeof(d.secret));
  } else {
    std::memcpy(d.secret, &h1, 8);
    std::memcpy(d.secret + 8, &h2, 8);
    static std::atomic<bool> warned{false};
    if (out->rank == 0 && !warned.exchange(true))
      log::warn(
          "{} launch: the rendezvous is unauthenticated in effect (its secret derives from the job id, root "
          "address, port and rank count, which other users on these hosts can know); set STRATA_SECRET_FILE (e.g. "
          "~/.strata/secret: created 0600 on first use) or STRATA_SECRET, the same for every rank",
          out->source);
  }
  // Rank 0 serves the rendezvous on the agreed port; the others retry until it listens.
  if (out->rank == 0) STRATA_RETURN_IF_ERROR(startRootServer(&d, /*persistent=*/false, out->nranks));
  out->id = encodeUniqueId(d);
  return OkStatus();
}

}  // namespace strata
