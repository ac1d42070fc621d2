// params.h: which pieces of which full tensors a rank holds, in flat per-class buffers.
//
// Every tensor has a name and a full shape; a rank's piece is a set of full rows and a column
// range (tensor parallelism cuts rows or columns, qkv cuts each of q, k, v; expert parallelism
// keeps whole expert tensors). Pieces live in one flat buffer per gradient class (mesh.h), in
// units (the embedding, each layer, the final LayerNorm, the tied embedding) padded so ZeRO can
// shard every unit evenly and the gradient norm can be summed in fixed blocks.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.h"
#include "config.h"
#include "mesh.h"

namespace trainer {

constexpr int kNormBlock = 64;  // gradient-norm partial sums run over blocks of this many elements

struct TensorSpec {
  std::string name;
  int rows = 0, cols = 1;                       // full shape
  std::vector<std::pair<int, int>> rowRanges;   // local rows: (first full row, count), in order
  int colStart = 0, colCount = 1;               // local columns
  int cls = CD, key = 0;                        // class, unit key (-1 wpe, layer, L final, L+1 wte)
  bool decay = false;                           // AdamW weight decay applies
  bool countInNorm = true;                      // false for copies another rank already counts
  int init = 0;                                 // 0 normal(std), 1 ones, 2 zeros
  float std = 0.02f;
  size_t offset = 0;                            // in its class buffer
  size_t localRows() const {
    size_t n = 0;
    for (auto& r : rowRanges) n += size_t(r.second);
    return n;
  }
  size_t size() const { return localRows() * size_t(colCount); }
  /// Full flat index (row * cols + col) of local element i.
  size_t globalIndex(size_t i) const;
};

struct Unit {
  int key = 0;
  size_t begin = 0, end = 0;  // padded range in the class buffer
};

struct ClassBuf {
  std::vector<Unit> units;
  size_t size = 0;       // padded total
  int shards = 1, shardRank = 0;
  Buf param, grad, scratch, m, v;  // m, v: the shard only under ZeRO (on the rank's lane, backend.h)
  // ZeRO-3: `param` holds only the owned shard (unit u's at u.begin/shards), and parameters are
  // read from `work`, a reusable buffer holding the full-index range [workBegin, workEnd) while
  // a unit (or, for checkpoints and the tied embedding, the whole class) is gathered.
  bool sharded = false;
  Buf work;
  size_t workBegin = 0, workEnd = 0;
  size_t shardIndex(const Unit& u) const { return u.begin / size_t(shards); }
  /// Bytes of parameters this rank holds in memory now (shard or full buffer, plus working buffer).
  size_t residentBytes() const { return (param.capacity() + work.capacity()) * sizeof(float); }
  float* at(size_t offset) {
    if (!sharded) return param.data() + offset;
    if (offset < workBegin || offset >= workEnd) throw std::logic_error("ZeRO-3 parameter used while not gathered");
    return work.data() + (offset - workBegin);
  }
  ByteBuf decay, count;                          // per element masks
  size_t shardBegin(const Unit& u) const { return u.begin + (u.end - u.begin) / shards * shardRank; }
  size_t shardLen(const Unit& u) const { return (u.end - u.begin) / shards; }
  size_t shardSize() const { return size / shards; }
};

/// Indices (into ParamStore::tensors) of one block's tensors; -1 where absent.
struct LayerIdx {
  int ln1w = -1, ln1b, qkvw, qkvb, attw, attb, ln2w, ln2b, fcw = -1, fcb, fcpw, fcpb, router = -1;
  struct Expert { int fcw, fcb, fcpw, fcpb; };
  std::vector<Expert> experts;  // local experts (global id = firstExpert + i)
};

struct ParamStore {
  std::vector<TensorSpec> tensors;
  ClassBuf cls[NCLS];
  std::unordered_map<std::string, int> byName;
  std::vector<LayerIdx> layers;  // indexed by global layer; only this rank's are filled
  int wte = -1, wpe = -1, lnfw = -1, lnfb = -1;
  int firstExpert = 0;

  float* P(int t) { return cls[tensors[t].cls].at(tensors[t].offset); }
  float* G(int t) { return cls[tensors[t].cls].scratch.data() + tensors[t].offset; }
  /// The (class, unit) pairs holding tensors of `key`.
  std::vector<std::pair<int, int>> unitsOf(int key) const;
};

/// The tensor pieces a rank with these mesh coordinates holds (no buffers; used for checkpoints).
std::vector<TensorSpec> rankTensors(const Config& cfg, const Mesh& m);
/// Builds the rank's store: layout, padding for `shards[c]`-way ZeRO, buffers, initial values.
void buildStore(ParamStore& ps, const Config& cfg, const Mesh& m, int zero);
/// Deterministic N(0,1) for (seed, tensor name, element): every layout initialises identically.
float initNormal(uint64_t seed, const std::string& name, uint64_t index);

}  // namespace trainer
