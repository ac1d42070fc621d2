// job_topology.h: the process's view of the job's topology: the cluster file (STRATA_TOPO_FILE,
// loaded once per process), this rank's node identity (host, or the file's virtual node), its
// interfaces, and the link costs the cost model starts from.
#pragma once

#include "collectives/cost_model.h"
#include "topology/model.h"
#include "transport/bootstrap.h"
#include "transport/status.h"

namespace strata {

/// The cluster of STRATA_TOPO_FILE, loaded on first use; *out = nullptr when none is set. A bad
/// file is an error naming the file and what is wrong (every call returns it).
Status jobCluster(const topology::Cluster** out);

/// Fills the node identity and the interfaces of `info` for `rank` (the rank in the communicator
/// created from a unique id, of `nranks`; -1 for split, which keeps the parent's node): the file's
/// placement puts the rank on a virtual node, else the host. A placement shorter than the
/// communicator fails on every rank.
Status fillNodeIdentity(int rank, int nranks, RankInfo* info);

/// Link costs for a communicator: the file's (with defaults for what it leaves out), else the
/// defaults. The rail bandwidth: a shaped virtual cluster's (STRATA_VCLUSTER_RAIL_RATE), else the
/// file's, else the slowest interface rate the ranks detected (sysfs), else the default.
CostModel::Costs jobLinkCosts(const std::vector<RankInfo>& infos);

/// The layout of a communicator from its ranks' infos: nodes by node identity. A rank's home rail
/// is its own choice, else the closest interface to its CPUs: among the interfaces on the NUMA
/// domain its CPUs lie in (all interfaces when that is unknown or none is there), the node's ranks
/// that choose among the same set are dealt over it in local-rank order.
topology::CommLayout layoutFromInfos(const std::vector<RankInfo>& infos);

/// The NUMA domain (sysfs) all CPUs of a mask lie in; -1 when they span several or it is unknown.
int cpuNumaDomain(const uint64_t cpuMask[4]);

}  // namespace strata
