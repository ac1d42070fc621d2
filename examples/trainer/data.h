// data.h: training sequences, identical for every layout.
//
// Sequence k of step s is a pure function of (seed, s, k), so every layout sees the same tokens:
// a step's global batch of B sequences is cut into microbatches, each split across the data ranks
// (dp*ep), and context parallelism gives each cp rank a head chunk and a tail chunk of every
// sequence (rank r of c: chunks r and 2c-1-r of 2c, so causal attention work is balanced).
//
//  - synthetic: copy task. The first half is random symbols, the second half repeats it; only the
//    second half is scored, and a model that learned to copy drives the loss to ~0.
//  - text: byte-level windows of a real corpus (default /usr/share/common-licenses/GPL-3, present on
//    every Debian system), scored everywhere; compare the loss with the corpus' unigram entropy.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "mesh.h"

namespace trainer {

class Data {
 public:
  /// Throws std::runtime_error when the text corpus cannot be read.
  explicit Data(const Config& cfg);
  /// Tokens x[0..T] of sequence k of step `step`; the model reads x[0..T-1] and predicts x[1..T].
  void sequence(int step, long k, int* x) const;
  /// Whether the prediction at input position t is scored.
  bool scored(int t) const { return !synthetic_ || t >= half_ - 1; }
  long scoredPerSequence() const;
  double unigramEntropy() const { return entropy_; }  // nats per byte of the corpus (text)
  double chanceLoss() const;                          // loss of a model that knows only the symbol set
  const std::string& source() const { return source_; }

 private:
  Config cfg_;
  bool synthetic_;
  int half_ = 0, symbols_ = 0;
  std::vector<unsigned char> corpus_;
  double entropy_ = 0;
  std::string source_;
};

/// One rank's share of one microbatch: b sequences x Tl positions, rows in (sequence, position) order.
struct MicroBatch {
  int b = 0, Tl = 0;
  std::vector<int> tok, tgt, pos;  // per row; tgt < 0 is not scored
  int step = 0;                    // training step (dropout masks)
  long seq0 = 0;                   // global index of the first sequence (sequence i is seq0 + i)
  int rows() const { return b * Tl; }
};

/// Global positions held by cp rank r (head chunk then tail chunk), T/cp of them.
std::vector<int> cpPositions(int T, int cp, int r);
MicroBatch makeMicroBatch(const Data& d, const Config& cfg, const Mesh& m, int step, int mb);

}  // namespace trainer
