// mesh.cc: rank coordinates from --order and the group communicators (strata::ParallelGroups, plus
// splits of the world for the gradient classes it has no kind for).
#include "mesh.h"

#include <fmt/format.h>

#include <stdexcept>

namespace trainer {

const char* clsName(int c) {
  static const char* names[] = {"dense", "replicated", "expert", "embedding"};
  return names[c];
}

static const char* kDimNames[NDIM] = {"tp", "cp", "ep", "dp", "pp"};

Mesh meshShape(const Config& cfg, int rank) {
  Mesh m;
  m.size = {cfg.tp, cfg.cp, cfg.ep, cfg.dp, cfg.pp};
  m.world = cfg.worldSize();
  m.rank = rank;
  size_t start = 0;
  for (int i = 0; i < NDIM; ++i) {
    size_t p = cfg.order.find('-', start);
    std::string name = cfg.order.substr(start, p == std::string::npos ? std::string::npos : p - start);
    for (int d = 0; d < NDIM; ++d)
      if (name == kDimNames[d]) m.order[i] = d;
    start = p + 1;
  }
  m.coord = m.coordsOf(rank);
  return m;
}

int Mesh::rankOf(const std::array<int, NDIM>& c) const {
  int r = 0;
  for (int i = NDIM - 1; i >= 0; --i) r = r * size[order[i]] + c[order[i]];
  return r;
}

std::array<int, NDIM> Mesh::coordsOf(int r) const {
  std::array<int, NDIM> c{};
  for (int i = 0; i < NDIM; ++i) {
    c[order[i]] = r % size[order[i]];
    r /= size[order[i]];
  }
  return c;
}

std::string Mesh::mapping() const {
  std::string s = "rank mapping (order ";
  for (int i = 0; i < NDIM; ++i) s += std::string(i ? "-" : "") + kDimNames[order[i]];
  s += ", first fastest):\n  rank   tp cp ep dp pp\n";
  for (int r = 0; r < world; ++r) {
    auto c = coordsOf(r);
    s += fmt::format("  {:4}   {:2} {:2} {:2} {:2} {:2}\n", r, c[TP], c[CP], c[EP], c[DP], c[PP]);
  }
  return s;
}

namespace {

// Ranks sharing every coordinate outside `dims` form a group, ordered by their coordinates in
// `dims` (in mesh order). member=false leaves this rank out (NOCOLOR).
Group split(const Mesh& m, strata::Communicator& world, std::array<bool, NDIM> dims, bool member = true) {
  int color = 0, key = 0;
  for (int i = NDIM - 1; i >= 0; --i) {
    int d = m.order[i];
    if (dims[d]) key = key * m.size[d] + m.coord[d];
    else color = color * m.size[d] + m.coord[d];
  }
  Group g;
  g.comm = world.split(member ? color : STRATA_SPLIT_NOCOLOR, key);
  if (member && g.comm.get()) {
    g.size = g.comm.size();
    g.rank = g.comm.rank();
  }
  return g;
}

// A group of the parallel-groups API, borrowed (m.groups owns the communicator).
Group view(const Mesh& m, strataGroupKind_t kind, const char* name) {
  Group g;
  g.name = name;
  g.comm = strata::Communicator::borrow(m.groups.comm(kind).get());
  g.size = g.comm.size();
  g.rank = g.comm.rank();
  return g;
}

}  // namespace

Mesh buildMesh(const Config& cfg, strata::Communicator& world) {
  Mesh m = meshShape(cfg, world.rank());
  m.worldComm = &world;
  strata::ParallelSizes sizes;
  sizes.tp = cfg.tp, sizes.cp = cfg.cp, sizes.ep = cfg.ep, sizes.dp = cfg.dp, sizes.pp = cfg.pp, sizes.order = cfg.order;
  m.groups = strata::ParallelGroups(world, sizes);
  const auto c = m.groups.coords();
  for (int d = 0; d < NDIM; ++d)  // strata's coordinate indices are the trainer's Dim values
    if (c[size_t(d)] != m.coord[d])
      throw std::runtime_error(fmt::format("rank {}: strata places it at {} {} but the trainer at {}", m.rank,
                                           kDimNames[d], c[size_t(d)], m.coord[d]));
  m.all = view(m, strataGroupWorld, "world");
  m.tp = view(m, strataGroupTp, "tp");
  m.cp = view(m, strataGroupCp, "cp");
  m.ep = view(m, strataGroupEp, "ep");
  m.pp = view(m, strataGroupPp, "pp");
  m.tpcp = view(m, strataGroupTpCp, "tp_cp");
  auto dims = [](std::initializer_list<Dim> ds) {
    std::array<bool, NDIM> a{};
    for (Dim d : ds) a[d] = true;
    return a;
  };
  const bool embMember = m.firstStage() || m.lastStage();
  // D is strata's dense-gradient group (dp_cp: ep x dp x cp); R (tp too), X (experts replicated
  // over tp) and E (with the first and last pipeline stage) have no kind of their own.
  const std::array<bool, NDIM> clsDims[NCLS] = {dims({DP, CP, EP}), dims({TP, DP, CP, EP}), dims({TP, DP, CP}),
                                                cfg.pp > 1 ? dims({DP, CP, EP, PP}) : dims({DP, CP, EP})};
  m.inClass[CE] = embMember;
  for (int c = 0; c < NCLS; ++c) {
    // The embedding group spans the first and last stage only: middle stages stay out. Its key
    // still counts every pp coordinate, so its rank 0 is the first stage's dp=cp=ep=0 rank.
    bool member = c == CE ? embMember : true;
    m.red[c] = split(m, world, clsDims[c], member);
    m.gat[c] = c == CD ? view(m, strataGroupDpCp, "") : split(m, world, clsDims[c], member);
    // named by the dimensions it spans that have more than one rank, e.g. dp, tp_dp, dp_pp
    std::string name;
    for (int d = 0; d < NDIM; ++d)
      if (clsDims[c][size_t(d)] && m.size[d] > 1) name += (name.empty() ? "" : "_") + std::string(kDimNames[d]);
    m.red[c].name = m.gat[c].name = name.empty() ? "self" : name;
  }
  return m;
}

}  // namespace trainer
