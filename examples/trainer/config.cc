// config.cc: command line and layout validation for strata-train.
#include "config.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace trainer {

std::string Config::layoutString() const {
  std::string s = fmt::format("dp{} tp{} pp{} cp{} ep{}", dp, tp, pp, cp, ep);
  if (sp) s += " sp";
  if (zero) s += fmt::format(" zero{}", zero);
  if (pp > 1) s += fmt::format(" {} m{}", schedule, microbatches);
  if (virtualStages > 1) s += fmt::format(" v{}", virtualStages);
  if (dropout > 0) s += fmt::format(" drop{}", dropout);
  return s;
}

int parseArgs(int argc, char** argv, Config& c, ParityOptions* parity) {
  CLI::App app{"strata-train: a small GPT trainer exercising every parallelism mode over strata.\n"
               "Run under strata-run (-n N, processes or --threads) or alone (one rank)."};
  app.set_help_all_flag("--help-all");
  app.add_option("--dp", c.dp, "data-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--tp", c.tp, "tensor-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--pp", c.pp, "pipeline-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--cp", c.cp, "context-parallel size (ring attention)")->check(CLI::PositiveNumber);
  app.add_option("--ep", c.ep, "expert-parallel size")->check(CLI::PositiveNumber);
  app.add_flag("--sp", c.sp, "sequence parallelism inside the tensor-parallel group");
  app.add_option("--zero", c.zero, "ZeRO stage 0-3 (3 = FSDP)")->check(CLI::Range(0, 3));
  app.add_option("--schedule", c.schedule, "pipeline schedule (zb: zero-bubble ZB-H1, backward split into B and W)")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zb"}));
  app.add_flag("--print-schedule", c.printSchedule,
               "print the pipeline schedule as a grid of time units per stage (F = B = W = 1) and exit");
  app.add_option("--microbatches", c.microbatches, "microbatches per step (gradient accumulation / pipeline)")
      ->check(CLI::PositiveNumber);
  app.add_option("--virtual-stages", c.virtualStages, "model chunks per pipeline rank (interleaved)")
      ->check(CLI::PositiveNumber);
  app.add_option("--order", c.order, "rank order of the groups, first varies fastest");
  app.add_option("--layers", c.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.hidden, "model width")->check(CLI::PositiveNumber);
  app.add_option("--heads", c.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--seq", c.seq, "sequence length")->check(CLI::Range(2, 1 << 16));
  app.add_option("--batch", c.batch, "global batch (sequences per step)")->check(CLI::PositiveNumber);
  app.add_option("--vocab", c.vocab, "vocabulary size (text data needs 256)")->check(CLI::Range(2, 1 << 20));
  app.add_option("--experts", c.experts, "MoE experts per layer (0: dense MLP)")->check(CLI::NonNegativeNumber);
  app.add_option("--topk", c.topk, "experts per token")->check(CLI::PositiveNumber);
  app.add_option("--capacity-factor", c.capacityFactor, "expert capacity factor (0: no dropping)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--aux-coef", c.auxCoef, "load-balancing loss weight")->check(CLI::NonNegativeNumber);
  app.add_option("--dropout", c.dropout, "dropout probability (attention output, MLP output, embeddings)")
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--steps", c.steps, "train until this step")->check(CLI::NonNegativeNumber);
  app.add_option("--seed", c.seed, "initialisation and data seed");
  app.add_option("--lr", c.lr, "AdamW learning rate");
  app.add_option("--weight-decay", c.weightDecay, "AdamW weight decay (matrices only)");
  app.add_option("--clip", c.clip, "gradient clipping norm (0: off)");
  app.add_option("--data", c.data, "training data")->check(CLI::IsMember({"synthetic", "text"}));
  app.add_option("--text-file", c.textFile, "corpus for --data text (default: GPL-3 from common-licenses)");
  app.add_option("--loss-log", c.lossLog, "write 'step loss' per step to this file");
  app.add_option("--save", c.save, "save a checkpoint (full unsharded tensors) into this folder");
  app.add_option("--save-at", c.saveAt, "with --save: save after this step (default: the last)");
  app.add_option("--save-every", c.saveEvery, "with --save: also save after every N steps")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--load", c.load, "resume from a checkpoint folder (any layout)");
  app.add_flag("--elastic", c.elastic,
               "pure data parallelism that survives dead ranks: the others shrink the world and resume from the "
               "last --save checkpoint with fewer data ranks and the same global batch (run under strata-run "
               "--keep-going)");
  app.add_option("--fail-rank", c.failRank, "fault injection: this rank kills itself (SIGKILL) ...");
  app.add_option("--fail-step", c.failStep, "... at the start of this step (elastic tests)");
  app.add_option("--plot", c.plot, "write a loss-curve PNG (gnuplot)");
  app.add_flag("--quiet", c.quiet, "print only the summary");
  app.add_option("--trace", c.trace,
                 "write a Chrome trace-event JSON of every rank (Perfetto, chrome://tracing), merged by rank 0");
  app.add_option("--device", c.device,
                 "where tensors live and layers run: cpu, or cuda (device memory, cuBLAS, CUDA kernels; ranks share "
                 "the GPUs: device = local rank % device count; needs a CUDA build and a CUDA device)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--no-overlap", c.noOverlap, "reduce gradients after backward, not during it");
  app.add_flag("--deterministic", c.deterministic,
               "bitwise reproducible reductions whatever the algorithm or node layout (STRATA_DETERMINISTIC=1)");
  app.add_option("--parity-case", parity->cases, "run these parity cases against one rank and exit (see --parity)");
  app.add_flag("--parity", parity->all, "run the whole parity matrix against one rank and print the table");
  app.add_option("--launcher", parity->launcher,
                 "with --parity/--parity-case: run ranks as processes through this strata-run (default: threads)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // strata reads its settings on first use, which comes after this: the variable is the switch
  // (it reaches every rank, threads and the processes a launcher starts from here alike).
  if (c.deterministic) setenv("STRATA_DETERMINISTIC", "1", 1);
  return -1;
}

std::vector<std::string> toArgs(const Config& c) {
  std::vector<std::string> a;
  auto add = [&](const char* flag, auto v) {
    a.push_back(flag);
    a.push_back(fmt::format("{}", v));
  };
  add("--dp", c.dp), add("--tp", c.tp), add("--pp", c.pp), add("--cp", c.cp), add("--ep", c.ep);
  if (c.sp) a.push_back("--sp");
  if (c.deterministic) a.push_back("--deterministic");
  add("--zero", c.zero), add("--schedule", c.schedule), add("--microbatches", c.microbatches);
  add("--virtual-stages", c.virtualStages), add("--order", c.order);
  add("--layers", c.layers), add("--hidden", c.hidden), add("--heads", c.heads), add("--seq", c.seq);
  add("--vocab", c.vocab), add("--experts", c.experts), add("--topk", c.topk);
  add("--capacity-factor", c.capacityFactor), add("--aux-coef", c.auxCoef);
  if (c.dropout > 0) add("--dropout", c.dropout);
  add("--batch", c.batch), add("--steps", c.steps), add("--seed", c.seed), add("--lr", c.lr);
  add("--weight-decay", c.weightDecay), add("--clip", c.clip), add("--data", c.data);
  if (!c.textFile.empty()) add("--text-file", c.textFile);
  if (c.quiet) a.push_back("--quiet");
  if (c.device != "cpu") add("--device", c.device);
  return a;
}

std::string validate(const Config& c, int world) {
  std::string err;
  auto bad = [&](const std::string& s) { err += "  - " + s + "\n"; };
  if (c.worldSize() != world)
    bad(fmt::format("world size {} != dp*tp*pp*cp*ep = {}*{}*{}*{}*{} = {}", world, c.dp, c.tp, c.pp, c.cp, c.ep,
                    c.worldSize()));
  if (c.hidden % c.heads) bad(fmt::format("hidden {} is not divisible by heads {}", c.hidden, c.heads));
  if (c.heads % c.tp) bad(fmt::format("heads {} are not divisible by tp {}", c.heads, c.tp));
  if (c.vocab % c.tp) bad(fmt::format("vocab {} is not divisible by tp {}", c.vocab, c.tp));
  if (c.layers % c.chunks())
    bad(fmt::format("layers {} are not divisible by pp*virtual-stages = {}*{}", c.layers, c.pp, c.virtualStages));
  if (c.batch % (c.microbatches * c.dataRanks()))
    bad(fmt::format("batch {} is not divisible by microbatches*dp*ep = {}*{}*{}", c.batch, c.microbatches, c.dp, c.ep));
  if (c.cp > 1 && c.seq % (2 * c.cp))
    bad(fmt::format("seq {} is not divisible by 2*cp = {} (each cp rank holds a head and a tail chunk)", c.seq,
                    2 * c.cp));
  if ((c.schedule == "1f1b" || c.schedule == "zb") && c.pp > 1 && c.microbatches < c.pp)
    bad(fmt::format("{} needs microbatches >= pp ({} < {})", c.schedule, c.microbatches, c.pp));
  if (c.schedule == "zb" && c.moe())
    bad("zb splits the backward of dense layers only: the MoE backward (router, experts, all-to-all) is not split; "
        "use 1f1b with --experts");
  if (c.schedule == "interleaved" && c.pp > 1 && c.microbatches % c.pp)
    bad(fmt::format("interleaved needs microbatches divisible by pp ({} % {})", c.microbatches, c.pp));
  if (c.virtualStages > 1 && c.schedule != "interleaved")
    bad("--virtual-stages > 1 needs --schedule interleaved");
  if (c.ep > 1 && !c.moe()) bad("--ep > 1 needs --experts");
  if (c.moe() && c.experts % c.ep) bad(fmt::format("experts {} are not divisible by ep {}", c.experts, c.ep));
  if (c.moe() && (c.topk < 1 || c.topk > c.experts))
    bad(fmt::format("topk {} must be in 1..experts ({})", c.topk, c.experts));
  if (c.data == "text" && c.vocab < 256) bad(fmt::format("--data text is byte-level: vocab must be >= 256 (is {})", c.vocab));
  if (!(c.dropout >= 0 && c.dropout < 1)) bad(fmt::format("--dropout {} must be in [0, 1)", c.dropout));
  if (c.data == "synthetic" && c.vocab < 4) bad("--data synthetic needs vocab >= 4");
  if (c.device == "cuda" && c.moe())
    bad("--device cuda runs dense models only: the MoE layers (router, experts, all-to-all) are host code");
  if (c.elastic && c.tp * c.pp * c.cp * c.ep != 1)
    bad("--elastic shrinks data parallelism only: tp, pp, cp and ep must be 1");
  if (c.elastic && c.save.empty()) bad("--elastic needs --save (and --save-every): survivors resume from it");
  if (c.saveEvery > 0 && c.save.empty()) bad("--save-every needs --save");
  if (c.failRank >= world) bad(fmt::format("--fail-rank {} is not a rank of {}", c.failRank, world));
  if (c.device == "cuda" && (!c.save.empty() || !c.load.empty()))
    bad("--device cuda cannot --save or --load yet (checkpoints read and write host buffers)");
  const long rowsPerRank = (c.batch % (c.microbatches * c.dataRanks()) == 0 && c.seq % c.cp == 0)
                               ? long(c.seqPerMicro()) * (c.seq / c.cp)
                               : 0;
  if ((c.sp || c.moe()) && c.tp > 1 && rowsPerRank % c.tp)
    bad(fmt::format("tokens per rank and microbatch ({}) are not divisible by tp {} (needed by --sp and MoE)",
                    rowsPerRank, c.tp));
  std::set<std::string> dims;
  size_t start = 0;
  for (;;) {
    size_t p = c.order.find('-', start);
    dims.insert(c.order.substr(start, p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  if (dims != std::set<std::string>{"tp", "cp", "ep", "dp", "pp"} || std::count(c.order.begin(), c.order.end(), '-') != 4)
    bad(fmt::format("--order '{}' must name tp, cp, ep, dp, pp once each, e.g. tp-cp-ep-dp-pp", c.order));
  return err;
}

}  // namespace trainer
