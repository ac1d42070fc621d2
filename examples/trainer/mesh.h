// mesh.h: the 5-D rank grid (tp, cp, ep, dp, pp) and its communicators. Rank order follows --order
// (Megatron's tp-cp-ep-dp-pp by default: the first dimension varies fastest, so tensor-parallel
// peers are neighbouring ranks). The groups come from strata's parallel-groups API
// (strata::ParallelGroups); the gradient-class groups it has no kind for are splits of the world.
#pragma once

#include <array>
#include <string>

#include "config.h"
#include "strata/strata.hpp"

namespace trainer {

enum Dim { TP = 0, CP = 1, EP = 2, DP = 3, PP = 4, NDIM = 5 };

/// Gradient classes: parameters are grouped by which ranks hold partial gradients of them.
///   D: dense, reduced over dp*cp*ep (tp-sharded, or identical on every tp rank)
///   R: replicated over tp with partial gradients (router; LayerNorms, row biases, wpe with --sp)
///   X: experts, reduced over tp*dp*cp (sharded over ep)
///   E: the tied embedding, reduced over dp*cp*ep and between the first and last pipeline stage
enum Cls { CD = 0, CR = 1, CX = 2, CE = 3, NCLS = 4 };
const char* clsName(int c);

/// One communicator plus this rank's place in it (size 1 groups make no calls).
struct Group {
  strata::Communicator comm;
  int size = 1, rank = 0;
  std::string name = "self";  // tp, cp, ep, pp, dp, tp_cp, world, or the dimensions a gradient-class group spans
  bool active() const { return size > 1; }
};

struct Mesh {
  int world = 1, rank = 0;
  std::array<int, NDIM> size{}, coord{};
  std::array<int, NDIM> order{};  // order[0] varies fastest
  strata::Communicator* worldComm = nullptr;
  strata::ParallelGroups groups;    // owns the communicators of all, tp, cp, ep, pp, tpcp and gat[CD]
  Group all, tp, cp, ep, pp, tpcp;  // all: a private copy of the world (loss, norm)
  Group red[NCLS];  // gradient reduction (the communication thread's)
  Group gat[NCLS];  // parameter gathers, norms (the training thread's)
  bool inClass[NCLS] = {true, true, true, true};  // E only on the first and last stage

  int dataRank() const { return coord[DP] * size[EP] + coord[EP]; }
  bool firstStage() const { return coord[PP] == 0; }
  bool lastStage() const { return coord[PP] == size[PP] - 1; }
  int rankOf(const std::array<int, NDIM>& c) const;
  std::array<int, NDIM> coordsOf(int r) const;
  std::string mapping() const;  // the rank table, printed at start
  std::string placement() const { return groups.report(); }  // the groups' links, nodes and rails
};

/// Collective over `world`: builds every group. Throws strata::Error on failure.
Mesh buildMesh(const Config& cfg, strata::Communicator& world);
/// Coordinates of every rank without building communicators (for checkpoints and tests).
Mesh meshShape(const Config& cfg, int rank);

}  // namespace trainer
