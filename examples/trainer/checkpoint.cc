// checkpoint.cc: gather pieces to rank 0 / scatter full tensors into pieces.
#include "checkpoint.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dp.h"

namespace trainer {

namespace {

// Full-layout (per class) copies of m and v: all-gathered from the shards under ZeRO.
void fullState(Ctx& c, int k, std::vector<float>& m, std::vector<float>& v) {
  ClassBuf& cb = c.ps->cls[k];
  if (c.cfg.zero == 0) {
    m = cb.m.vec(), v = cb.v.vec();
    return;
  }
  m.assign(cb.size, 0.f), v.assign(cb.size, 0.f);
  for (const Unit& u : cb.units) {
    const size_t off = u.begin / size_t(cb.shards), len = cb.shardLen(u);
    c.allGather(c.mesh->gat[k], cb.m.data() + off, m.data() + u.begin, len);
    c.allGather(c.mesh->gat[k], cb.v.data() + off, v.data() + u.begin, len);
  }
}

bool samePiece(const TensorSpec& a, const TensorSpec& b) {
  return a.name == b.name && a.rowRanges == b.rowRanges && a.colStart == b.colStart && a.colCount == b.colCount;
}

nlohmann::json modelJson(const Config& cfg) {
  return {{"layers", cfg.layers}, {"hidden", cfg.hidden}, {"heads", cfg.heads}, {"seq", cfg.seq},
          {"vocab", cfg.vocab},   {"experts", cfg.experts}};
}

// Which ranks send which of their pieces: the lowest rank holding each distinct piece.
std::vector<std::vector<int>> canonicalPieces(const Config& cfg, std::vector<std::vector<TensorSpec>>& all) {
  const int W = cfg.worldSize();
  all.resize(size_t(W));
  for (int r = 0; r < W; ++r) all[size_t(r)] = rankTensors(cfg, meshShape(cfg, r));
  std::vector<std::vector<int>> out(static_cast<size_t>(W));
  std::vector<const TensorSpec*> seen;
  for (int r = 0; r < W; ++r)
    for (size_t i = 0; i < all[size_t(r)].size(); ++i) {
      const TensorSpec& t = all[size_t(r)][i];
      bool dup = false;
      for (const TensorSpec* s : seen)
        if (samePiece(*s, t)) dup = true;
      if (dup) continue;
      seen.push_back(&t);
      out[size_t(r)].push_back(int(i));
    }
  return out;
}

}  // namespace

void saveCheckpoint(Ctx& c, const std::string& dir, int step) {
  Mesh& mesh = *c.mesh;
  ParamStore& ps = *c.ps;
  std::vector<float> fm[NCLS], fv[NCLS];
  for (int k = 0; k < NCLS; ++k) {
    if (k == CE && !mesh.inClass[CE]) continue;
    if (c.cfg.zero == 3) c.sync->gatherClass(k);
    fullState(c, k, fm[k], fv[k]);
  }
  std::vector<std::vector<TensorSpec>> all;
  auto canon = canonicalPieces(c.cfg, all);
  // This rank's local tensor i as [param | m | v].
  auto pack = [&](int i) {
    const TensorSpec& t = ps.tensors[size_t(i)];
    std::vector<float> buf(3 * t.size());
    for (size_t j = 0; j < t.size(); ++j) {
      buf[j] = ps.P(i)[j];
      buf[t.size() + j] = fm[t.cls][t.offset + j];
      buf[2 * t.size() + j] = fv[t.cls][t.offset + j];
    }
    return buf;
  };
  if (mesh.rank != 0) {
    for (int i : canon[size_t(mesh.rank)]) {
      std::vector<float> buf = pack(i);
      mesh.all.comm.send(buf.data(), buf.size(), 0);
    }
  } else {
    // Written beside `dir`, then swapped in: a rank dying mid-save (elastic runs) leaves the last
    // whole checkpoint in place.
    const std::string tmp = dir + ".writing";
    std::filesystem::remove_all(tmp);
    std::filesystem::create_directories(tmp);
    std::map<std::string, std::vector<float>> full;
    nlohmann::json meta = {{"step", step}, {"model", modelJson(c.cfg)}, {"layout", c.cfg.layoutString()}};
    for (int r = 0; r < mesh.world; ++r)
      for (int i : canon[size_t(r)]) {
        const TensorSpec& t = all[size_t(r)][size_t(i)];
        std::vector<float> buf;
        if (r == 0) buf = pack(i);
        else {
          buf.resize(3 * t.size());
          mesh.all.comm.recv(buf.data(), buf.size(), r);
        }
        auto& f = full[t.name];
        const size_t n = size_t(t.rows) * size_t(t.cols);
        if (f.empty()) {
          f.assign(3 * n, 0.f);
          meta["tensors"][t.name] = {t.rows, t.cols};
        }
        for (size_t j = 0; j < t.size(); ++j)
          for (int s = 0; s < 3; ++s) f[size_t(s) * n + t.globalIndex(j)] = buf[size_t(s) * t.size() + j];
      }
    for (auto& [name, f] : full) {
      std::ofstream out(tmp + "/" + name + ".bin", std::ios::binary);
      out.write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size() * sizeof(float)));
      if (!out) throw std::runtime_error("cannot write " + tmp + "/" + name + ".bin");
    }
    std::ofstream(tmp + "/meta.json") << meta.dump(2) << "\n";
    const std::string old = dir + ".old";
    std::filesystem::remove_all(old);
    if (std::filesystem::exists(dir)) std::filesystem::rename(dir, old);
    std::filesystem::rename(tmp, dir);
    std::filesystem::remove_all(old);
  }
  if (c.cfg.zero == 3)
    for (int k = 0; k < NCLS; ++k) c.sync->releaseClass(k);
  mesh.all.comm.barrier();
}

bool checkpointExists(const std::string& dir) {
  return std::filesystem::exists(dir + "/meta.json") || std::filesystem::exists(dir + ".old/meta.json");
}

int loadCheckpoint(Ctx& c, const std::string& given) {
  // A save that stopped between its two renames left the previous checkpoint as <dir>.old.
  const std::string dir = !std::filesystem::exists(given + "/meta.json") && std::filesystem::exists(given + ".old/meta.json")
                              ? given + ".old"
                              : given;
  std::ifstream in(dir + "/meta.json");
  if (!in) throw std::runtime_error("no checkpoint at " + dir + " (meta.json missing)");
  nlohmann::json meta = nlohmann::json::parse(in);
  if (meta["model"] != modelJson(c.cfg))
    throw std::runtime_error(fmt::format("checkpoint model {} does not match this run's {}", meta["model"].dump(),
                                         modelJson(c.cfg).dump()));
  ParamStore& ps = *c.ps;
  std::vector<float> fm[NCLS], fv[NCLS];
  for (int k = 0; k < NCLS; ++k) fm[k].assign(ps.cls[k].size, 0.f), fv[k].assign(ps.cls[k].size, 0.f);
  if (c.cfg.zero == 3)
    for (int k = 0; k < NCLS; ++k) c.sync->openClass(k);  // full-size working buffer, filled below
  for (const TensorSpec& t : ps.tensors) {
    const size_t n = size_t(t.rows) * size_t(t.cols);
    std::vector<float> f(3 * n);
    std::ifstream bin(dir + "/" + t.name + ".bin", std::ios::binary);
    bin.read(reinterpret_cast<char*>(f.data()), std::streamsize(f.size() * sizeof(float)));
    if (!bin) throw std::runtime_error("checkpoint tensor " + t.name + " is missing or short");
    ClassBuf& cb = ps.cls[t.cls];
    for (size_t j = 0; j < t.size(); ++j) {
      const size_t g = t.globalIndex(j);
      cb.at(t.offset)[j] = f[g];
      fm[t.cls][t.offset + j] = f[n + g];
      fv[t.cls][t.offset + j] = f[2 * n + g];
    }
  }
  for (int k = 0; k < NCLS; ++k) {
    ClassBuf& cb = ps.cls[k];
    if (c.cfg.zero == 0) {
      cb.m.vec() = fm[k], cb.v.vec() = fv[k];
      continue;
    }
    for (const Unit& u : cb.units) {
      const size_t off = u.begin / size_t(cb.shards), at = cb.shardBegin(u);
      for (size_t j = 0; j < cb.shardLen(u); ++j) cb.m.vec()[off + j] = fm[k][at + j], cb.v.vec()[off + j] = fv[k][at + j];
    }
    if (c.cfg.zero == 3) c.sync->commitClass(k), c.sync->releaseClass(k);
  }
  return meta["step"].get<int>();
}

}  // namespace trainer
