// config.h: the trainer's settings (one struct), its command line (CLI11) and layout validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct Config {
  // parallel layout
  int dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  bool sp = false;
  int zero = 0;
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb (ZB-H1, schedule.h)
  int microbatches = 1;
  int virtualStages = 1;
  std::string order = "tp-cp-ep-dp-pp";
  // model
  int layers = 2, hidden = 32, heads = 4, seq = 16, vocab = 64;
  int experts = 0, topk = 1;
  float capacityFactor = 0.f;  // 0: no token dropping
  float auxCoef = 0.01f;
  float dropout = 0.f;  // inverted dropout after attention, MLP and the embedding sum (training)
  // training
  int batch = 8, steps = 10;
  uint64_t seed = 1;
  float lr = 3e-3f, weightDecay = 0.1f, clip = 1.0f, beta1 = 0.9f, beta2 = 0.95f;
  std::string data = "synthetic";  // synthetic | text
  std::string textFile;            // default: the first of kTextCandidates that exists
  std::string lossLog, save, load, plot;
  int saveAt = 0;  // with --save: step after which to save (0: at the end)
  int saveEvery = 0;  // with --save: also after every this many steps (0: never)
  // Elastic data parallelism (pure DP): when a rank dies the survivors shrink the world, rebuild
  // the mesh with fewer data ranks and resume from the last --save checkpoint (train.cc).
  bool elastic = false;
  int failRank = -1, failStep = 0;  // fault injection for tests: rank failRank SIGKILLs itself at step failStep
  bool quiet = false;
  bool noOverlap = false;  // DP: reduce buckets after backward instead of during it
  bool deterministic = false;  // strata's deterministic reductions (STRATA_DETERMINISTIC=1)
  std::string trace;           // Chrome trace-event JSON of every rank, merged by rank 0
  bool printSchedule = false;  // print the pipeline schedule as a grid and exit
  std::string device = "cpu";  // cpu | cuda (backend.h: tensors in device memory, cuBLAS, CUDA kernels)

  int worldSize() const { return dp * tp * pp * cp * ep; }
  int ffn() const { return 4 * hidden; }
  bool moe() const { return experts > 0; }
  int chunks() const { return pp * virtualStages; }  // model chunks along the pipeline
  int layersPerChunk() const { return layers / chunks(); }
  int dataRanks() const { return dp * ep; }  // ranks holding different sequences
  int seqPerMicro() const { return batch / (microbatches * dataRanks()); }  // per data rank
  std::string layoutString() const;
};

/// The parity matrix: which cases, and whether ranks run as processes through a launcher.
struct ParityOptions {
  std::vector<std::string> cases;  // empty with `all`: every case
  bool all = false;
  std::string launcher;            // strata-run: ranks as processes; empty: ranks as threads
  std::string device = "cpu";      // the layouts run here; the reference always runs on the CPU
  bool active() const { return all || !cases.empty(); }
};

/// Parses argv into cfg. Returns -1 to go on, else the exit code (help, bad flags).
int parseArgs(int argc, char** argv, Config& cfg, ParityOptions* parity);
/// Command-line flags that reproduce cfg (model, layout, data, training).
std::vector<std::string> toArgs(const Config& cfg);

/// Empty when the layout can run on `world` ranks, else the reason (one line per problem).
std::string validate(const Config& cfg, int world);

}  // namespace trainer
