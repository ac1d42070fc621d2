// train.cc: strata-train, a small GPT trainer that runs every parallelism mode over strata.
//
//   build/tools/strata-run -n 8 -- build/examples/trainer/strata-train --dp 2 --tp 2 --pp 2
//       ... --layers 4 --hidden 64 --heads 4 --seq 32 --batch 16 --vocab 256 --data text --steps 50
//   build/tools/strata-run -n 8 --threads -- build/examples/trainer/strata-train ...   (ranks as threads)
//   build/examples/trainer/strata-train --parity      (every layout against one rank, as a table)
//
// One training step: build this rank's microbatches, run the pipeline schedule (forward and
// backward of each microbatch, gradient buckets reduced by the communication thread meanwhile),
// reduce the tied embedding, all-reduce the loss, clip and apply AdamW. See docs/TRAINER.md.
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <iterator>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "backend.h"
#include "checkpoint.h"
#include "dp.h"
#include "model.h"
#include "optim.h"
#include "pp.h"
#include "strata/strata.hpp"
#include "tp.h"

namespace trainer {

namespace {

struct RunResult {
  std::vector<double> losses;  // per step, from the first step run
  int firstStep = 0;
};

// One step's figures from the span breakdown (trace.h), in a vector so ranks can average them.
struct StepFigures {
  enum { kWall, kCompute, kExposed, kBubble, kFraction, kReduce, kOverlap, kN };
  double v[kN] = {};
  static StepFigures of(const StepBreakdown& b) {
    StepFigures f;
    f.v[kWall] = b.wall, f.v[kCompute] = b.compute(), f.v[kExposed] = b.exposed, f.v[kBubble] = b.bubble;
    f.v[kFraction] = b.bubbleFraction(), f.v[kReduce] = b.reduce, f.v[kOverlap] = b.overlap;
    return f;
  }
  // compute = step - exposed communication - pipeline transfers; bubble = time blocked in pipeline
  // transfers (waiting for the neighbour stage); bubble fraction = 1 - time in passes / pipeline
  // run; grad reduce = the communication thread's collectives, and the share of them that ran while
  // the training thread was in a backward (B or W) pass.
  std::string line(const Config& cfg) const {
    std::string s = fmt::format("{:7.0f} tok/s | compute {:6.1f} ms | exposed comm {:6.1f} ms",
                                double(cfg.batch) * cfg.seq / v[kWall], 1e3 * v[kCompute], 1e3 * v[kExposed]);
    if (cfg.pp > 1)
      s += fmt::format(" | bubble {:6.1f} ms, fraction {:.3f} (theory {:.3f})", 1e3 * v[kBubble], v[kFraction],
                       theoreticalBubble(cfg));
    if (v[kReduce] > 0)
      s += fmt::format(" | grad reduce {:6.1f} ms, {:3.0f}% during backward", 1e3 * v[kReduce],
                       100.0 * v[kOverlap] / v[kReduce]);
    return s;
  }
};

// Revokes every communicator of the mesh (elastic: after a failure, before unwinding).
void revokeAll(Mesh& m) {
  std::vector<Group*> groups = {&m.all, &m.tp, &m.cp, &m.ep, &m.pp, &m.tpcp};
  for (int k = 0; k < NCLS; ++k) groups.push_back(&m.red[k]), groups.push_back(&m.gat[k]);
  for (Group* g : groups) {
    if (!g->comm.get()) continue;
    try {
      g->comm.revoke();
    } catch (const strata::Error&) {  // already destroyed or revoked: nothing runs in it
    }
  }
}

// One rank's whole training run. `print`: this rank reports (world rank 0).
RunResult runRank(const Config& cfg, strata::Communicator& world, bool print) {
  // The compute lane first (it outlives every tensor): the host, or this rank's GPU (local rank %
  // devices: ranks as threads use their rank, processes the launcher's local rank).
  const char* localEnv = std::getenv("STRATA_RANK") ? std::getenv("STRATA_LOCAL_RANK") : nullptr;
  std::unique_ptr<Ops> lane =
      makeOps(cfg.device == "cuda" ? Device::Cuda : Device::Host, localEnv ? std::atoi(localEnv) : world.rank());
  UseOps use(lane.get());
  Mesh mesh = buildMesh(cfg, world);
  print = print && mesh.rank == 0;
  Data data(cfg);
  ParamStore ps;
  buildStore(ps, cfg, mesh, cfg.zero);
  Ctx c;
  c.init(cfg, mesh, ps, data);
  c.ops = lane.get();
  GradSync sync(c);
  c.sync = &sync;
  Model model(c);
  Pipeline pipe(c, model);
  if (print && !cfg.quiet) {
    std::printf("strata-train: %d ranks, layout %s, device %s\n%s%s", mesh.world, cfg.layoutString().c_str(),
                cfg.device.c_str(), mesh.mapping().c_str(), mesh.placement().c_str());
    size_t nparams = 0;
    for (auto& t : rankTensors(cfg, meshShape(cfg, 0))) nparams += t.size();
    std::printf("model: %d layers, hidden %d, %d heads, seq %d, vocab %d%s; data: %s; rank 0 holds %zu parameters\n",
                cfg.layers, cfg.hidden, cfg.heads, cfg.seq, cfg.vocab,
                cfg.moe() ? fmt::format(", {} experts top-{}", cfg.experts, cfg.topk).c_str() : "",
                data.source().c_str(), nparams);
    if (cfg.pp > 1)
      std::printf("pipeline: %s, %d microbatches, %d virtual stages, %d ticks, theoretical bubble %.3f%s\n",
                  cfg.schedule.c_str(), cfg.microbatches, cfg.virtualStages, pipe.ticks(), theoreticalBubble(cfg),
                  splitBackward(cfg) ? " (F = B = W)" : "");
    std::fflush(stdout);
  }
  RunResult res;
  int start = 0;
  if (!cfg.load.empty()) {
    start = loadCheckpoint(c, cfg.load);
    if (print && !cfg.quiet) std::printf("resumed from %s at step %d\n", cfg.load.c_str(), start);
  } else if (cfg.zero == 3) {
    for (int k = 0; k < NCLS; ++k) sync.releaseClass(k);
  }
  res.firstStep = start;
  // Parameter bytes each rank holds: now (ZeRO-3: the shards only) beside the full local model.
  auto reportResident = [&](const char* when, bool peak) {
    if (cfg.quiet) return;
    double mine[2] = {0, 0};
    for (const ClassBuf& cb : ps.cls) mine[0] += double(cb.residentBytes()), mine[1] += double(cb.size * sizeof(float));
    if (peak) mine[0] = std::max(mine[0], double(sync.peakResident()));
    std::vector<double> all(2 * size_t(mesh.world));
    c.allGather(mesh.all, mine, all.data(), 2);
    if (!print) return;
    std::printf("parameters resident %s (%s):", when, cfg.zero == 3 ? "sharded, zero3" : "full");
    for (int r = 0; r < mesh.world; ++r)
      std::printf(" r%d %.0f/%.0f B", r, all[2 * size_t(r)], all[2 * size_t(r) + 1]);
    std::printf(" (resident/full)\n");
    std::fflush(stdout);
  };
  reportResident("at start", false);
  std::FILE* log = nullptr;
  if (print && !cfg.lossLog.empty()) {
    log = std::fopen(cfg.lossLog.c_str(), start > 0 ? "a" : "w");
    if (!log) throw std::runtime_error("cannot write " + cfg.lossLog);
  }
  const double scored = double(cfg.batch) * double(data.scoredPerSequence());
  const int M = cfg.microbatches;
  if (!cfg.trace.empty()) {  // a common time origin: every rank leaves the barrier at about once
    mesh.all.comm.barrier();
    c.rec.enable(now());
  }
  StepFigures sum;  // averaged over ranks, summed over the steps after the first
  int summed = 0;
  try {
  for (int step = start; step < cfg.steps; ++step) {
    if (cfg.failRank == world.rank() && step + 1 == cfg.failStep) {  // fault injection (elastic tests)
      std::fprintf(stderr, "strata-train: rank %d kills itself at step %d (--fail-rank)\n", world.rank(), step + 1);
      std::fflush(stderr);
      raise(SIGKILL);
    }
    const double t0 = now();
    std::vector<MicroBatch> mbs;
    for (int mb = 0; mb < M; ++mb) mbs.push_back(makeMicroBatch(data, cfg, mesh, step, mb));
    sync.beginStep(M);
    model.beginStep(&mbs, scored);
    if (cfg.zero == 3) sync.gatherClass(CE);
    pipe.run(tp::resRows(c, mbs[0].rows()));
    {
      Scope span(c.rec, Kind::Phase, 0, "gradient sync");
      sync.finish();
    }
    double sums[2] = {model.ceSum, model.auxSum};
    c.allReduce(mesh.all, sums, 2);
    const double loss = sums[0] / scored + sums[1] / double(M * cfg.dataRanks());
    double norm = 0;
    {
      Scope span(c.rec, Kind::Phase, 0, "optimizer");
      norm = optimizerStep(c, step + 1);
    }
    if (cfg.zero == 3) sync.releaseClass(CE);
    const double t1 = now();
    c.rec.add({t0, t1, Lane::Main, Kind::Step, 0, fmt::format("step {}", step + 1), ""});
    std::vector<Span> spans = c.rec.take();
    StepFigures f = StepFigures::of(breakdown(spans, t0, t1));
    c.rec.keep(std::move(spans));
    c.allReduce(mesh.all, f.v, StepFigures::kN);  // recorded, but outside the next step's window
    for (double& x : f.v) x /= mesh.world;
    f.v[StepFigures::kWall] = t1 - t0;  // rank 0's step (tokens/s)
    if (step > start) {
      for (int i = 0; i < StepFigures::kN; ++i) sum.v[i] += f.v[i];
      ++summed;
    }
    res.losses.push_back(loss);
    if (log) std::fprintf(log, "%d %.9g\n", step + 1, loss), std::fflush(log);
    if (print && !cfg.quiet) {
      std::printf("step %4d | loss %.6f | norm %.3f | %s\n", step + 1, loss, norm, f.line(cfg).c_str());
      std::fflush(stdout);
    }
    if (!cfg.save.empty() && (step + 1 == (cfg.saveAt > 0 ? cfg.saveAt : cfg.steps) ||
                              (cfg.saveEvery > 0 && (step + 1) % cfg.saveEvery == 0))) {
      saveCheckpoint(c, cfg.save, step + 1);
      if (print && !cfg.quiet) std::printf("saved checkpoint after step %d to %s\n", step + 1, cfg.save.c_str());
    }
  }
  } catch (const strata::Error&) {
    if (log) std::fclose(log);
    // Elastic: stop every call still running in this mesh's communicators (the communication
    // thread's) so that unwinding ends at once; the caller shrinks the world.
    if (cfg.elastic) revokeAll(mesh);
    throw;
  }
  if (log) std::fclose(log);
  if (print && !cfg.quiet && summed > 0) {
    for (double& x : sum.v) x /= summed;
    std::printf("mean of steps %d-%d, over ranks: %s\n", start + 2, cfg.steps, sum.line(cfg).c_str());
    std::fflush(stdout);
  }
  if (!cfg.trace.empty()) {
    std::string name = fmt::format("rank {}", mesh.rank);  // and its coordinates in the dimensions used
    const char* dims[NDIM] = {"tp", "cp", "ep", "dp", "pp"};
    for (int d = 0; d < NDIM; ++d)
      if (mesh.size[d] > 1) name += fmt::format(" {}{}", dims[d], mesh.coord[d]);
    writeMergedTrace(mesh.all, c.rec.events(mesh.rank, name), cfg.trace);
    if (print) std::printf("trace of %d ranks: %s\n", mesh.world, cfg.trace.c_str());
  }
  if (cfg.zero == 3) reportResident("peak during training", true);
  if (print && !res.losses.empty()) {
    std::printf("final loss %.4f (first %.4f); %s %.4f nats\n", res.losses.back(), res.losses.front(),
                cfg.data == "text" ? "unigram entropy of the corpus" : "loss of guessing among the copy symbols",
                data.chanceLoss());
    std::fflush(stdout);
  }
  return res;
}

// --elastic: runs this rank; when a rank dies (a strata error), shrinks the world to the ranks
// still alive (STRATA_SHRINK_DETECT: nobody has to know who died), rebuilds the mesh with that
// many data ranks and the same global batch, and resumes from the last --save checkpoint (from
// the start if there is none yet). Returns rank 0's losses of the last incarnation.
RunResult runElastic(Config cfg, strata::Communicator& world0) {
  strata::Communicator shrunk;
  strata::Communicator* world = &world0;
  for (;;) {
    try {
      RunResult res = runRank(cfg, *world, true);
      if (world->rank() != 0) res.losses.clear();  // rank 0 reports (and plots)
      return res;
    } catch (const strata::Error& e) {
      const int before = world->size(), rank = world->rank();
      std::fprintf(stderr, "strata-train: rank %d of %d: %s; shrinking to the ranks alive\n", rank, before, e.what());
      std::fflush(stderr);
      const double t0 = now();
      strata::Communicator next = world->shrink({}, STRATA_SHRINK_ABORT | STRATA_SHRINK_DETECT);
      cfg.dp = next.size();
      cfg.failRank = -1;
      cfg.load = checkpointExists(cfg.save) ? cfg.save : "";
      if (std::string err = validate(cfg, next.size()); !err.empty())
        throw std::runtime_error(fmt::format("cannot go on with {} data ranks:\n{}", next.size(), err));
      if (next.rank() == 0) {
        std::printf("elastic: %d of %d ranks left (shrunk in %.2f s); dp %d, global batch %d, resuming from %s\n",
                    next.size(), before, now() - t0, cfg.dp, cfg.batch,
                    cfg.load.empty() ? "the start (no checkpoint yet)" : cfg.load.c_str());
        std::fflush(stdout);
      }
      shrunk = std::move(next);  // the previous world goes once the new one exists
      world = &shrunk;
    }
  }
}

// Runs `n` ranks as threads of this process; returns rank 0's result. A failing rank ends the
// process (its peers would otherwise wait for it).
RunResult runThreads(const Config& cfg, int n, bool print) {
  std::vector<strata::Communicator> comms = strata::Communicator::threads(n);
  RunResult res;
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        RunResult rr = runRank(cfg, comms[size_t(r)], print && r == 0);
        if (r == 0) res = std::move(rr);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "strata-train: rank %d failed: %s\n", r, e.what());
        std::fflush(stderr);
        std::_Exit(1);
      }
    });
  for (auto& t : ts) t.join();
  return res;
}

void writePlot(const Config& cfg, const std::vector<double>& losses, int first, double chance) {
  const std::string dat = cfg.plot + ".dat";
  {
    std::ofstream out(dat);
    for (size_t i = 0; i < losses.size(); ++i) out << first + int(i) + 1 << " " << losses[i] << "\n";
  }
  std::string script = fmt::format(
      "set terminal pngcairo size 900,500; set output '{}'; set xlabel 'step'; set ylabel 'loss (nats)';"
      "set title 'strata-train {} ({} data)'; set grid;"
      "plot '{}' using 1:2 with lines lw 2 title 'training loss', {} with lines dt 2 title '{}'",
      cfg.plot, cfg.layoutString(), cfg.data, dat, chance, cfg.data == "text" ? "unigram entropy" : "chance (copy symbols)");
  std::string cmd = "gnuplot -e \"" + script + "\" 2>&1";
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "strata-train: gnuplot failed or is not installed; the data is in %s\n", dat.c_str());
  else
    std::printf("loss curve: %s\n", cfg.plot.c_str());
}

// ---- parity matrix -------------------------------------------------------------------------

struct Case {
  const char* name;
  std::function<void(Config&)> apply;
  bool bitwise;  // reduction order identical to the reference (two data ranks, one microbatch each)
};

Config parityBase() {
  Config b;
  b.layers = 4, b.hidden = 32, b.heads = 4, b.seq = 16, b.vocab = 256, b.batch = 8, b.steps = 10;
  b.data = "text", b.quiet = true, b.lr = 3e-3f;
  return b;
}

void moe(Config& c) { c.experts = 4, c.topk = 2, c.capacityFactor = 1.0f; }

std::vector<Case> parityCases() {
  return {
      {"dp2", [](Config& c) { c.dp = 2; }, true},
      {"zero1", [](Config& c) { c.dp = 2, c.zero = 1; }, true},
      {"zero2", [](Config& c) { c.dp = 2, c.zero = 2; }, true},
      {"zero3", [](Config& c) { c.dp = 2, c.zero = 3; }, true},
      {"tp2", [](Config& c) { c.tp = 2; }, false},
      {"tp2_sp", [](Config& c) { c.tp = 2, c.sp = true; }, false},
      {"pp2_gpipe", [](Config& c) { c.pp = 2, c.schedule = "gpipe", c.microbatches = 4; }, false},
      {"pp2_1f1b", [](Config& c) { c.pp = 2, c.schedule = "1f1b", c.microbatches = 4; }, false},
      {"pp2_interleaved",
       [](Config& c) { c.pp = 2, c.schedule = "interleaved", c.microbatches = 4, c.virtualStages = 2; }, false},
      {"cp2", [](Config& c) { c.cp = 2; }, false},
      {"ep2", [](Config& c) { moe(c), c.ep = 2; }, false},
      {"dp2_tp2_pp2", [](Config& c) { c.dp = 2, c.tp = 2, c.pp = 2, c.microbatches = 2; }, false},
      {"tp2_cp2_ep2_sp", [](Config& c) { moe(c), c.tp = 2, c.cp = 2, c.ep = 2, c.sp = true; }, false},
      {"dp2_tp2_pp2_zero3_sp",
       [](Config& c) { c.dp = 2, c.tp = 2, c.pp = 2, c.zero = 3, c.sp = true, c.microbatches = 2; }, false},
      {"dp2_tp2_ep2_zero1", [](Config& c) { moe(c), c.dp = 2, c.tp = 2, c.ep = 2, c.zero = 1; }, false},
      {"pp2_cp2_ep2_zero2", [](Config& c) { moe(c), c.pp = 2, c.cp = 2, c.ep = 2, c.zero = 2, c.microbatches = 2; }, false},
      {"tp2_pp2_interleaved_sp",
       [](Config& c) { c.tp = 2, c.pp = 2, c.sp = true, c.schedule = "interleaved", c.microbatches = 4, c.virtualStages = 2; },
       false},
      {"dp4_zero3", [](Config& c) { c.dp = 4, c.zero = 3; }, false},
      {"cp4", [](Config& c) { c.cp = 4; }, false},
      {"pp4_1f1b", [](Config& c) { c.pp = 4, c.microbatches = 4; }, false},
      // dropout 0.1: every layout computes its shard of the same global mask
      {"tp2_sp_drop", [](Config& c) { c.dropout = 0.1f, c.tp = 2, c.sp = true; }, false},
      {"cp2_drop", [](Config& c) { c.dropout = 0.1f, c.cp = 2; }, false},
      {"pp2_1f1b_drop", [](Config& c) { c.dropout = 0.1f, c.pp = 2, c.schedule = "1f1b", c.microbatches = 4; }, false},
      {"zero3_drop", [](Config& c) { c.dropout = 0.1f, c.dp = 2, c.zero = 3; }, true},
      {"tp2_cp2_ep2_sp_drop", [](Config& c) { c.dropout = 0.1f, moe(c), c.tp = 2, c.cp = 2, c.ep = 2, c.sp = true; }, false},
      {"dp2_tp2_pp2_order", [](Config& c) { c.dp = 2, c.tp = 2, c.pp = 2, c.microbatches = 2, c.order = "pp-dp-tp-cp-ep"; },
       false},
      // zero-bubble (ZB-H1): the backward split into B and W must leave the gradients unchanged
      {"pp2_zb", [](Config& c) { c.pp = 2, c.schedule = "zb", c.microbatches = 4; }, false},
      {"pp4_zb", [](Config& c) { c.pp = 4, c.schedule = "zb", c.microbatches = 4; }, false},
      {"dp2_pp2_zb", [](Config& c) { c.dp = 2, c.pp = 2, c.schedule = "zb", c.microbatches = 2; }, false},
      {"dp2_pp2_zb_zero3", [](Config& c) { c.dp = 2, c.pp = 2, c.zero = 3, c.schedule = "zb", c.microbatches = 2; }, false},
      {"tp2_pp2_zb_sp", [](Config& c) { c.tp = 2, c.pp = 2, c.sp = true, c.schedule = "zb", c.microbatches = 4; }, false},
      {"pp4_zb_drop", [](Config& c) { c.dropout = 0.1f, c.pp = 4, c.schedule = "zb", c.microbatches = 4; }, false},
      {"dp2_tp2_pp2_zb", [](Config& c) { c.dp = 2, c.tp = 2, c.pp = 2, c.schedule = "zb", c.microbatches = 2; }, false},
  };
}

// The single-rank run a layout must match: same model and data, one microbatch per data rank's share.
Config referenceOf(const Config& c) {
  Config r = c;
  r.dp = r.tp = r.pp = r.cp = r.ep = 1;
  r.sp = false, r.zero = 0, r.schedule = "1f1b", r.virtualStages = 1;
  r.microbatches = c.microbatches * c.dataRanks();
  return r;
}

// Runs cfg as processes: launcher -n N -- this program <flags> --loss-log FILE; returns the losses.
std::vector<double> runProcesses(const Config& cfg, const std::string& launcher, const std::string& tag) {
  char tmpl[] = "/tmp/strata-train-parity-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl, log = dir + "/loss.log";
  std::string cmd = fmt::format("'{}' -n {} -- /proc/{}/exe", launcher, cfg.worldSize(), getpid());
  for (const std::string& a : toArgs(cfg)) cmd += " '" + a + "'";
  cmd += " --loss-log '" + log + "' > '" + dir + "/out.txt' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::vector<double> losses;
  std::ifstream in(log);
  int step;
  double loss;
  while (in >> step >> loss) losses.push_back(loss);
  if (rc != 0) {
    std::ifstream out(dir + "/out.txt");
    std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s: launcher exited with %d:\n%s\n", tag.c_str(), rc, text.c_str());
  }
  std::filesystem::remove_all(dir);
  return losses;
}

int runParity(const ParityOptions& opt) {
  const std::vector<std::string>& only = opt.cases;
  auto run = [&](const Config& c, const std::string& tag) {
    return opt.launcher.empty() ? runThreads(c, c.worldSize(), false).losses : runProcesses(c, opt.launcher, tag);
  };
  std::map<std::string, std::vector<double>> refCache;
  int failures = 0, ran = 0, skipped = 0;
  // On the GPU the layouts are compared with the CPU's single-rank run: cuBLAS and the device's
  // exp/log/tanh round differently from the host loops, so equality is within a tolerance
  // (docs/TRAINER.md, "On a GPU"): the first step (the forward pass on the initial weights) within
  // kGpuFirstStepTol, every step within kGpuTol, relative. On the CPU: 1e-5 (and bitwise where marked).
  const bool gpu = opt.device == "cuda";
  constexpr double kGpuFirstStepTol = 1e-5, kGpuTol = 1e-4;
  const char* topo = std::getenv("STRATA_TOPO_FILE");  // e.g. ranks on virtual nodes (parity_matrix.sh vnodes)
  std::printf("parity matrix: every layout against one rank on the same tokens (ranks as %s%s%s%s)\n",
              opt.launcher.empty() ? "threads" : "processes", topo && *topo ? ", STRATA_TOPO_FILE=" : "",
              topo && *topo ? topo : "", gpu ? "; layouts on --device cuda, reference on the CPU" : "");
  std::printf("%-24s %5s  %-42s %13s %8s  %s\n", "case", "ranks", "layout", "max rel diff", "bitwise", "result");
  for (const Case& k : parityCases()) {
    if (!only.empty() && std::find(only.begin(), only.end(), k.name) == only.end()) continue;
    ++ran;
    Config cfg = parityBase();
    k.apply(cfg);
    cfg.device = opt.device;
    if (gpu && cfg.moe() && only.empty()) {  // the whole matrix on a GPU: dense layouts only
      std::printf("%-24s %5d  %-42s %13s %8s  %s\n", k.name, cfg.worldSize(), cfg.layoutString().c_str(), "-", "-",
                  "skipped (MoE is host-only)");
      ++skipped;
      continue;
    }
    std::string err = validate(cfg, cfg.worldSize());
    if (!err.empty()) {
      std::printf("%-24s invalid layout:\n%s", k.name, err.c_str());
      ++failures;
      continue;
    }
    Config ref = referenceOf(cfg);
    ref.device = "cpu";
    std::string key = fmt::format("{}-{}-{}", ref.microbatches, ref.experts, ref.dropout);
    if (!refCache.count(key)) refCache[key] = run(ref, std::string(k.name) + " reference");
    const std::vector<double>& a = refCache[key];
    std::vector<double> b = run(cfg, k.name);
    double worst = 0, first = 0;
    bool same = a.size() == b.size();
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      const double rel = std::abs(a[i] - b[i]) / std::abs(a[i]);
      worst = std::max(worst, rel);
      if (i == 0) first = rel;
      same = same && a[i] == b[i];
    }
    bool ok = a.size() == b.size() &&
              (gpu ? first <= kGpuFirstStepTol && worst <= kGpuTol : worst <= 1e-5 && (!k.bitwise || same));
    failures += !ok;
    std::printf("%-24s %5d  %-42s %13.2e %8s  %s\n", k.name, cfg.worldSize(), cfg.layoutString().c_str(), worst,
                same ? "yes" : "no", ok ? "ok" : "FAIL");
    std::fflush(stdout);
  }
  if (!only.empty() && ran != int(only.size())) {
    std::printf("unknown parity case among the ones asked for\n");
    return 2;
  }
  if (gpu)
    std::printf("parity: %d passed, %d failed, %d skipped (reference: 1 rank on the CPU, same tokens; %d steps, "
                "tolerance %.0e relative at step 1, %.0e at every step)\n",
                ran - failures - skipped, failures, skipped, parityBase().steps, kGpuFirstStepTol, kGpuTol);
  else
    std::printf("parity: %d passed, %d failed (reference: 1 rank, same tokens; %s steps, tolerance 1e-5 relative)\n",
                ran - failures, failures, std::to_string(parityBase().steps).c_str());
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace trainer

int main(int argc, char** argv) {
  using namespace trainer;
  Config cfg;
  ParityOptions parity;
  if (int rc = parseArgs(argc, argv, cfg, &parity); rc >= 0) return rc;
  parity.device = cfg.device;
  if (cfg.device == "cuda" && !cfg.printSchedule) {  // at once, before any rank starts
    if (std::string why = deviceUnavailable(Device::Cuda); !why.empty()) {
      std::fprintf(stderr, "strata-train: %s\n", why.c_str());
      return 3;
    }
  }
  try {
    if (parity.active()) return runParity(parity);
    if (cfg.printSchedule) {
      if (std::string err = validate(cfg, cfg.worldSize()); !err.empty()) {
        std::fprintf(stderr, "strata-train: invalid layout:\n%s", err.c_str());
        return 2;
      }
      std::printf("%s", drawSchedule(cfg).c_str());
      return 0;
    }
    const char* nthreads = std::getenv("STRATA_NTHREADS");
    const bool threads = nthreads && !std::getenv("STRATA_RANK");
    const bool launched = std::getenv("STRATA_RANK") || std::getenv("RANK") || std::getenv("OMPI_COMM_WORLD_RANK") ||
                          std::getenv("SLURM_PROCID");
    RunResult res;
    if (threads || !launched) {
      const int n = threads ? std::atoi(nthreads) : 1;
      if (std::string err = validate(cfg, n); !err.empty()) {
        std::fprintf(stderr, "strata-train: invalid layout for %d ranks:\n%s", n, err.c_str());
        return 2;
      }
      res = runThreads(cfg, n, true);
    } else {
      strata::Communicator world = strata::Communicator::fromEnv();
      if (std::string err = validate(cfg, world.size()); !err.empty()) {
        std::fprintf(stderr, "strata-train: invalid layout for %d ranks:\n%s", world.size(), err.c_str());
        std::fflush(stderr);
        world.barrier();  // every rank has said so before any exits (the launcher stops the rest)
        return 2;
      }
      res = cfg.elastic ? runElastic(cfg, world) : runRank(cfg, world, true);
      if (world.rank() != 0 && !cfg.elastic) return 0;
    }
    if (!cfg.plot.empty() && !res.losses.empty()) {
      Data d(cfg);
      writePlot(cfg, res.losses, res.firstStep, d.chanceLoss());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-train: %s\n", e.what());
    return 1;
  }
  return 0;
}
