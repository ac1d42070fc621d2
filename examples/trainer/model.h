// model.h: the GPT, one pipeline chunk at a time.
//
//   x   = wte[tok] + wpe[pos]                                  (chunk 0: vocab-parallel lookup)
//   per block:  x += attn.proj(attention(attn.qkv(ln1(x))))     (column / row parallel, ring attention)
//               x += mlp.proj(gelu(mlp.fc(ln2(x))))  or  MoE(ln2(x))
//   logits = ln_f(x) @ wte^T, loss = cross-entropy              (last chunk: tied head, vocab-parallel)
//
// Chunk c of pp*V holds layers [c*L/(pp*V), (c+1)*L/(pp*V)) and runs on pipeline rank c % pp.
// forward/backward of (chunk, microbatch) keep their activations between the two calls.
//
// Every backward is two halves per layer: the input gradient (B: what the previous layer and
// stage need) and the weight gradient (W: parameter gradients, from the layer's saved inputs and
// the output gradients B keeps for it). backward() runs both per layer, in turn; a zero-bubble
// schedule calls backwardInput() and, later, backwardWeight(), which keeps only what W needs in
// between. The gradient arithmetic is the same either way, so the step sees the same gradients.
//
// Activations and gradients are Bufs on the rank's lane (backend.h) and every layer runs through
// the lane's Ops: host memory and kernels.h's loops on the CPU, device memory, cuBLAS and CUDA
// kernels with --device cuda. MoE layers (ep.cc) are host-only (config.cc refuses them on a GPU).
#pragma once

#include <map>
#include <vector>

#include "context.h"
#include "data.h"
#include "ep.h"

namespace trainer {

struct LayerAct {
  Buf x, ln1, ln1m, ln1r, ain, qkv, att, lse, x2, ln2, ln2m, ln2r, min, h, g;
  ep::MoeCache moe;
  // Output gradients B keeps for W: of the MLP branch after dropout (mlp.proj bias), of mlp.proj's
  // output (dy), of mlp.fc's output (dh), of ln2's output, of the attention branch after dropout
  // (attn.proj bias), of attn.proj's output, of qkv, of ln1's output.
  Buf dmlp, dy, dh, dln2, datb, dproj, dqkv, dln1;
};

struct ChunkAct {
  std::vector<LayerAct> layers;
  Buf xlast, lnf, lnfm, lnfr, hin, logits, rowMax, stats;
  Buf dlogits, dlnf;  // head: kept by B for W
  Buf demb, dpos;     // chunk 0: gradient of the embedding lookup (all rows) and sum
};

/// A microbatch's tokens, targets and positions on the lane (device copies with --device cuda).
struct MbInts {
  IntBuf tok, tgt, pos;
};

/// Inverted-dropout scales (0 or 1/(1-p)) for rows [rf, rf+Nr) of this rank's rows of mb in the
/// residual layout, full hidden width. Element (row, feature) depends only on (seed, step, global
/// sequence, layer, site, position in the full sequence, feature): every layout computes its shard
/// of the same global mask. site: 0 embedding sum (layer -1), 1 attention output, 2 MLP output.
std::vector<float> dropoutMask(const Config& cfg, const MicroBatch& mb, int layer, int site, int rf, int Nr);

class Model {
 public:
  explicit Model(Ctx& c) : c_(c) {}
  /// Sets the step's microbatches (this rank's rows of each) and resets the loss sums.
  void beginStep(const std::vector<MicroBatch>* mbs, double scoredTokens);
  /// Local chunk v (global chunk v*pp + stage) on microbatch mb. xin: the previous chunk's output
  /// (ignored for chunk 0); xout receives this chunk's output (left empty for the last chunk).
  void forward(int v, int mb, const float* xin, Buf& xout);
  /// dxout: gradient of this chunk's output (ignored for the last chunk); dxin receives the
  /// gradient of its input (left empty for chunk 0). Input and weight gradients, layer by layer.
  void backward(int v, int mb, const float* dxout, Buf& dxin);
  /// B: the input gradient only; keeps what backwardWeight needs.
  void backwardInput(int v, int mb, const float* dxout, Buf& dxin);
  /// W: the weight gradients of (v, mb), after its backwardInput; frees the chunk's activations.
  void backwardWeight(int v, int mb);

  double ceSum = 0;   // sum of scored token losses this rank counts (tp rank 0 of the last stage)
  double auxSum = 0;  // sum of aux losses this rank counts (tp*cp rank 0)
  bool training = true;  // dropout applies only while training

 private:
  int chunkOf(int v) const { return v * c_.mesh->size[PP] + c_.mesh->coord[PP]; }
  void layerFwd(int l, LayerAct& a, const MicroBatch& mb, const MbInts& in, const float* x, float* out);
  void backwardImpl(int v, int mb, const float* dxout, Buf& dxin, bool weightsToo);
  void headWeight(ChunkAct& act, int mb);
  void embedWeight(ChunkAct& act, const MicroBatch& mb, int mbi);
  // B of a layer: dx from dout; keeps the output gradients W needs in `a`. W: parameter gradients.
  void layerBwdInput(int l, LayerAct& a, const MicroBatch& mb, const MbInts& in, const float* dout, float* dx);
  void layerBwdWeight(int l, LayerAct& a, const MicroBatch& mb);
  bool dropping() const { return training && c_.cfg.dropout > 0.f; }
  /// dropoutMask on the lane.
  Buf mask(const MicroBatch& mb, int layer, int site, int rf, int Nr) const;

  Ctx& c_;
  const std::vector<MicroBatch>* mbs_ = nullptr;
  std::vector<MbInts> ints_;  // per microbatch
  std::map<std::pair<int, int>, ChunkAct> acts_;
  std::vector<int> weightCount_;  // per local chunk: microbatches whose weight gradients are done
  float ceScale_ = 0, auxScale_ = 0;
};

}  // namespace trainer
