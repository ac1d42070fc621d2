// planner_test.cc: strata-plan's models: memory against hand-computed cases, pipeline bubbles
// against the closed forms, each parallel dimension's communication against the cost model, model
// file errors, a 16,384-GPU plan in seconds, and the validation files against their sources.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "collectives/cost_model.h"
#include "planner/host.h"
#include "planner/job_sim.h"
#include "planner/plan.h"
#include "planner/validation.h"

using namespace strata;
using namespace strata::planner;

static ModelSpec gptSmall() {  // Korthikanti et al.'s setting: GeLU 4h, dropout, unfused attention
  ModelSpec m;
  m.layers = 4, m.hidden = 1024, m.heads = 16, m.kvHeads = 16, m.ffn = 4096, m.vocab = 51200, m.seq = 2048;
  m.dropout = true, m.flashAttention = false, m.globalBatch = 64;
  return m;
}

static HardwareSpec h100(int nodes) {
  HardwareSpec hw;
  EXPECT_TRUE(loadClusterFile(TOPO_FILES_DIR "/dgx_h100_8n.json", &hw).ok());
  hw.nodes = nodes;
  return hw;
}

TEST(PlannerMemory, ActivationsMatchKorthikanti) {
  const ModelSpec m = gptSmall();
  const double sbh = 2048.0 * 1 * 1024;
  Layout l;  // tp1, no recomputation: sbh (34 + 5 a s / h)
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, l), sbh * (34 + 5.0 * 16 * 2048 / 1024));
  l.tp = 8, l.sp = false;  // tensor parallel without SP: sbh (10 + 24/t + 5 a s / (h t))
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, l), sbh * (10 + 24.0 / 8 + 5.0 * 16 * 2048 / (1024 * 8)));
  l.sp = true;  // with SP: sbh (34/t + 5as/(ht))
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, l), sbh * (34.0 / 8 + 5.0 * 16 * 2048 / (1024 * 8)));
  l.recompute = Recompute::Selective;  // selective: the attention scores go
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, l), sbh * 34.0 / 8);
  l.recompute = Recompute::Full;  // full: the layer input only
  EXPECT_DOUBLE_EQ(layerActivationBytes(m, l), 2 * sbh / 8);
}

TEST(PlannerMemory, StatesByZeroStage) {
  ModelSpec m = gptSmall();
  const HardwareSpec hw = h100(1);
  Layout l;
  l.dp = 8, l.zero = 0;
  const double P = m.totalParams();  // one stage holds everything (tied embeddings: no)
  EXPECT_DOUBLE_EQ(stageParams(m, l, 0), P);
  MemoryBreakdown b = memoryPerGpu(m, l, hw, 1);
  EXPECT_DOUBLE_EQ(b.weights, 2 * P);
  EXPECT_DOUBLE_EQ(b.grads, 4 * P);
  EXPECT_DOUBLE_EQ(b.optimizer, 12 * P);
  l.zero = 1;
  b = memoryPerGpu(m, l, hw, 1);
  EXPECT_DOUBLE_EQ(b.optimizer, 12 * P / 8);
  EXPECT_DOUBLE_EQ(b.grads, 4 * P);
  l.zero = 2;
  EXPECT_DOUBLE_EQ(memoryPerGpu(m, l, hw, 1).grads, 4 * P / 8);
  l.zero = 3;
  b = memoryPerGpu(m, l, hw, 1);
  const double layer = m.attentionParams() + m.mlpParams();
  EXPECT_DOUBLE_EQ(b.weights, 2 * P / 8 + 2 * 2 * layer);
  // Two stages: layers split, embedding on the first, output layer on the last.
  l.pp = 2, l.dp = 4;
  EXPECT_DOUBLE_EQ(stageParams(m, l, 0), 2 * layer + m.embeddingParams());
  // Activations scale with microbatches in flight and layers per stage; reserve 5% + 2 GiB.
  l.zero = 1;
  b = memoryPerGpu(m, l, hw, 2);
  EXPECT_DOUBLE_EQ(b.activations, 2 * 2 * layerActivationBytes(m, l));
  EXPECT_DOUBLE_EQ(b.reserve, 0.05 * 80 * double(1ull << 30) + 2 * double(1ull << 30));
}

TEST(PlannerPipeline, BubblesMatchClosedForms) {
  auto equal = [](int chunks) { return std::vector<PassCost>(size_t(chunks), PassCost{1, 1, 1}); };
  for (int p : {2, 4, 8})
    for (long m : {8L, 16L, 32L}) {
      // gpipe and 1f1b: (p-1)/(m+p-1) with B = 2F (unsplit backward B + W).
      for (PipeSchedule s : {PipeSchedule::GPipe, PipeSchedule::OneFOneB}) {
        const PipelineResult r = simulatePipeline(s, p, 1, m, equal(p), 0);
        EXPECT_NEAR(r.bubble, double(p - 1) / (m + p - 1), 1e-9) << scheduleName(s) << " p" << p << " m" << m;
      }
      const PipelineResult iv = simulatePipeline(PipeSchedule::Interleaved, p, 2, m, equal(2 * p), 0);
      EXPECT_LE(iv.bubble, double(p - 1) / (2 * m + p - 1) + 0.02) << "interleaved p" << p << " m" << m;
      const PipelineResult zb = simulatePipeline(PipeSchedule::ZeroBubble, p, 1, m, equal(p), 0);
      EXPECT_NEAR(zb.bubble, double(p - 1) / (3 * m + p - 1), 1e-9) << "zb p" << p << " m" << m;
      EXPECT_EQ(simulatePipeline(PipeSchedule::OneFOneB, p, 1, m, equal(p), 0).peakInFlight, p);
      EXPECT_EQ(simulatePipeline(PipeSchedule::GPipe, p, 1, m, equal(p), 0).peakInFlight, m);
    }
  // Transfers lengthen the pipeline: at least the fill and drain's 2 (p - 1) boundaries, at most
  // those plus two per microbatch in the steady state.
  const PipelineResult a = simulatePipeline(PipeSchedule::OneFOneB, 4, 1, 8, equal(4), 0);
  const PipelineResult b = simulatePipeline(PipeSchedule::OneFOneB, 4, 1, 8, equal(4), 0.1);
  EXPECT_GE(b.makespan - a.makespan, 2 * 3 * 0.1 - 1e-9);
  EXPECT_LE(b.makespan - a.makespan, (2 * 3 + 2 * 8) * 0.1 + 1e-9);
}

TEST(PlannerComm, TensorParallelInsideNodeIsTheCostModels) {
  const HardwareSpec hw = h100(4);
  Layout l;
  l.tp = 8, l.dp = 4;
  const GroupShape g = groupShape(l.spec(), 1u << 0, 8);
  EXPECT_EQ(g.nodes, 1);
  EXPECT_EQ(g.locals.size(), 8u);
  CommCoster c(hw);
  const double bytes = 64 << 20;
  const CommTime t = c.collective(g, CollType::AllReduce, bytes);
  const topology::CommLayout lay = shapeLayout(g, 1, hw);
  const CostModel model(lay, c.costs());
  const double direct = model.predict(t.algo, CollType::AllReduce, size_t(bytes / 2), 2);
  EXPECT_NEAR(t.seconds, direct, 0.02 * direct);
  // Ring over NVLink: about 2 (n-1)/n bytes / bandwidth.
  EXPECT_NEAR(t.seconds, 2 * 7.0 / 8 * bytes / 360e9, 0.15 * t.seconds);
  EXPECT_GT(c.collective(g, CollType::AllReduce, 2 * bytes).seconds, 1.8 * t.seconds);
}

TEST(PlannerComm, DataParallelAcrossNodesAndExtrapolation) {
  const HardwareSpec hw = h100(256);
  CommCoster c(hw);
  Layout l;
  l.tp = 8, l.dp = 32;  // dp: one GPU per node, 32 nodes, all on rail 0
  GroupShape g = groupShape(l.spec(), 1u << 3, 8);
  EXPECT_EQ(g.nodes, 32);
  EXPECT_EQ(g.locals, std::vector<int>{0});
  const double bytes = 256 << 20;
  const CommTime t = c.collective(g, CollType::ReduceScatter, bytes);
  const topology::CommLayout lay32 = shapeLayout(g, 32, hw);  // the model keeps a reference
  const CostModel model(lay32, c.costs());
  const double direct = model.predict(t.algo, CollType::ReduceScatter, size_t(bytes / 2 / 32), 2);
  EXPECT_NEAR(t.seconds, direct, 0.03 * direct);
  // 256 nodes: beyond the simulated sizes the fit is extrapolated; compare with a direct run.
  l.dp = 256;
  g = groupShape(l.spec(), 1u << 3, 8);
  const CommTime big = c.collective(g, CollType::ReduceScatter, bytes);
  const topology::CommLayout lay256 = shapeLayout(g, 256, hw);
  const CostModel bigModel(lay256, c.costs());
  const double bigDirect = bigModel.predict(big.algo, CollType::ReduceScatter, size_t(bytes / 2 / 256), 2);
  EXPECT_NEAR(big.seconds, bigDirect, 0.10 * bigDirect) << algoName(big.algo);
  // Point to point between pipeline stages on different nodes: one rail message.
  l.tp = 8, l.dp = 1, l.pp = 32;
  const GroupShape pp = groupShape(l.spec(), 1u << 4, 8);
  EXPECT_NEAR(c.p2p(pp, 1e6), 4e-6 + 1e6 / 50e9, 1e-9);
}

TEST(PlannerStep, EveryDimensionCosted) {
  ModelSpec m;
  m.layers = 8, m.hidden = 4096, m.heads = 32, m.kvHeads = 8, m.ffn = 14336, m.vocab = 32000, m.seq = 8192;
  m.gatedMlp = true, m.experts = 8, m.topk = 2, m.globalBatch = 64;
  StepModel sm(m, h100(4));
  Layout l;
  l.tp = 2, l.cp = 2, l.ep = 2, l.pp = 2, l.dp = 2, l.zero = 1, l.recompute = Recompute::Full;
  ASSERT_EQ(checkLayout(l, m, 32, 8), "");
  const Prediction p = sm.predict(l, true);
  std::set<std::string> dims;
  for (const DimComm& d : p.comms) {
    dims.insert(d.dim);
    EXPECT_GT(d.total, 0) << d.dim;
    EXPECT_LE(d.exposed, d.total + 1e-12) << d.dim;
  }
  EXPECT_EQ(dims, (std::set<std::string>{"tp", "cp", "ep", "pp", "dp"}));
  EXPECT_GT(p.step, p.computePerStep);
}

// Context and expert parallelism by hand. cp: the forward ring is cp-1 hops of K,V, the backward
// cp hops of K,V with dK,dV; overlapped (a GPU framework) only the excess over the attention is
// exposed, blocking (the reference trainer) all of it. ep: 2 all-to-alls of the routed rows per
// pass plus one of the counts per forward, and the busiest rank's expected excess expert work.
TEST(PlannerStep, ContextAndExpertParallelByHand) {
  // E[max of 2 standard normals] = 1/sqrt(pi): 2 ranks, 256 assignments, 128 each on average.
  EXPECT_NEAR(expertImbalance(2, 256), 1 + std::sqrt(0.5 / 128) / std::sqrt(M_PI), 1e-4);
  EXPECT_NEAR(expertImbalance(8, 1024), 1 + 1.4236 * std::sqrt(0.875 / 128), 1e-3);  // E[max of 8] = 1.4236
  EXPECT_EQ(expertImbalance(1, 1024), 1.0);
  EXPECT_LT(expertImbalance(8, 8 * 8192), 1.02);  // Mixtral-sized microbatches: noise is small

  ModelSpec m;
  m.layers = 8, m.hidden = 4096, m.heads = 32, m.kvHeads = 8, m.ffn = 14336, m.vocab = 32000, m.seq = 8192;
  m.gatedMlp = true, m.globalBatch = 64;
  Layout l;
  l.tp = 1, l.cp = 4, l.dp = 8, l.zero = 1;
  ASSERT_EQ(checkLayout(l, m, 32, 8), "");
  const HardwareSpec hw = h100(4);
  auto cpComm = [&](bool overlap) {
    StepOptions opt;
    opt.cpOverlap = overlap;
    for (const DimComm& d : StepModel(m, hw, opt).predict(l, true).comms)
      if (d.dim == "cp") return d;
    return DimComm{};
  };
  const DimComm hidden = cpComm(true), blocking = cpComm(false);
  const GroupShape g = groupShape(l.spec(), 1u << 1, 8);
  CommCoster coster(hw);
  const double T = double(m.seq) / l.cp, kv = 2 * T * m.kvHeads * m.headDim() * m.paramBytes;
  const double perLayer = 3 * coster.p2p(g, kv) + 4 * coster.p2p(g, 2 * kv);
  const long M = l.microbatches(m);
  EXPECT_NEAR(blocking.total, perLayer * m.layers * M, 1e-9 * blocking.total);
  EXPECT_DOUBLE_EQ(blocking.exposed, blocking.total);
  EXPECT_DOUBLE_EQ(hidden.total, blocking.total);
  EXPECT_LT(hidden.exposed, 0.5 * hidden.total);  // 2K tokens of attention hide most of an NVLink ring

  m.experts = 8, m.topk = 2;
  l.cp = 1, l.ep = 4, l.dp = 2, l.tp = 4, l.sp = true;
  ASSERT_EQ(checkLayout(l, m, 32, 8), "");
  const Prediction p = StepModel(m, hw).predict(l, true);
  const GroupShape ge = groupShape(l.spec(), 1u << 2, 8);
  const double rows = double(m.seq) / l.tp * m.topk * m.hidden * m.paramBytes;  // the SP slice's routed rows
  const double a2a = coster.collective(ge, CollType::AllToAll, rows).seconds;
  const double counts = coster.collective(ge, CollType::AllToAll, 4.0 * m.experts).seconds;
  int epRows = 0;
  for (const DimComm& d : p.comms)
    if (d.dim == "ep") {
      ++epRows;
      EXPECT_NEAR(d.total, (2 * a2a + counts + 2 * a2a) * m.layers * l.microbatches(m), 1e-9 * d.total);
    }
  EXPECT_EQ(epRows, 1);
  Layout dense = l;
  dense.ep = 1, dense.dp = 8;  // the same tokens per rank, every expert local: no wait for the busiest
  const double excess = (expertImbalance(4, double(m.seq) / l.tp * m.topk * 4) - 1) * expertForwardSeconds(m, l, hw);
  EXPECT_GT(excess, 0);
  EXPECT_NEAR(p.plan.layerCompute.fwd - StepModel(m, hw).predict(dense, true).plan.layerCompute.fwd, excess,
              1e-9 + 1e-6 * excess);
}

TEST(PlannerFiles, ModelFileErrorsNameTheField) {
  ModelSpec m;
  Status st = parseModelJson(R"({"version": 1, "layers": 2, "hidden": 64, "heads": 5, "ffn": 256, "vocab": 100,
                                 "seq": 16, "global_batch": 8})", "m.json", &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("m.json: heads"), std::string::npos) << st.message();
  st = parseModelJson(R"({"version": 1, "layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 100,
                          "seq": 16, "global_batch": 8, "recompte": "full"})", "m.json", &m);
  EXPECT_NE(st.message().find("unknown key \"recompte\""), std::string::npos) << st.message();
  st = parseModelJson(R"({"version": 1, "layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "seq": 16, "global_batch": 8})",
                      "m.json", &m);
  EXPECT_NE(st.message().find("missing \"vocab\""), std::string::npos) << st.message();
  for (const char* f : {"gpt3_175b", "llama3_8b", "llama3_70b", "llama3_405b", "mixtral_8x7b"})
    EXPECT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/" + f + ".json", &m).ok()) << f;
  EXPECT_NEAR(m.totalParams() / 1e9, 46.7, 0.5);  // Mixtral-like 8x7B: ~46.7B parameters
}

TEST(PlannerPlan, SixteenThousandGpusInSeconds) {
  HardwareSpec hw;
  ASSERT_TRUE(loadClusterFile(TOPO_FILES_DIR "/dgx_h100_2048n.json", &hw).ok());
  ASSERT_EQ(hw.gpus(), 16384);
  ModelSpec m;
  ASSERT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/llama3_405b.json", &m).ok());
  const auto t0 = std::chrono::steady_clock::now();
  const PlanResult r = makePlan(m, hw, SearchSpace{}, StepOptions{});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.ranked[0].mfu, 0.2);
  EXPECT_LT(r.ranked[0].mfu, 0.8);
  for (size_t i = 1; i < r.ranked.size(); ++i) EXPECT_LE(r.ranked[i - 1].step, r.ranked[i].step);
  std::printf("16,384-GPU plan: %d layouts in %.2f s, winner %s\n", r.candidates, s, r.ranked[0].layout.describe().c_str());
}

// The validation files load, their published step times follow from the published throughput by
// the source's own FLOP count (MT-NLG also published its iteration times: 60.1, 50.2, 44.4 s),
// the Megatron-LM rows stay within 10% (docs/PLANNER.md; a change of the models shows here), and
// the Llama 3 runs fit in their GPUs' memory as they did.
TEST(PlannerValidation, FilesLoadAndPublishedStepsMatchTheSources) {
  const std::string root = std::string(PLANNER_MODELS_DIR) + "/../..";
  for (const char* f : {"megatron_2021", "llama3_405b", "bloom_176b", "mt_nlg_530b"}) {
    std::vector<ValidationRow> rows;
    ASSERT_TRUE(loadValidationFile(root + "/planner/validation/" + f + ".json", root, &rows).ok()) << f;
    EXPECT_FALSE(rows.empty()) << f;
  }
  std::vector<ValidationRow> mt;
  ASSERT_TRUE(loadValidationFile(root + "/planner/validation/mt_nlg_530b.json", root, &mt).ok());
  runValidation(&mt);
  const double iteration[] = {60.1, 50.2, 44.4};
  ASSERT_EQ(mt.size(), 3u);
  for (size_t i = 0; i < mt.size(); ++i) EXPECT_NEAR(mt[i].publishedStep, iteration[i], 0.01 * iteration[i]) << mt[i].name;
  std::vector<ValidationRow> meg;
  ASSERT_TRUE(loadValidationFile(root + "/planner/validation/megatron_2021.json", root, &meg).ok());
  runValidation(&meg);
  for (const ValidationRow& r : meg) EXPECT_LT(std::abs(r.error), 0.10) << r.name << ": " << r.error;
  // Llama 3 405B ran without recomputation on 80 GB GPUs: with the paper's FSDP (gradients and
  // optimizer sharded, weights kept whole through the step: ZeRO-2) and a schedule holding p
  // microbatches of the first stage's layers (1F1B), the memory model must find room for it, and
  // not by much (activations of 16 microbatches of a stage's layers). Meta's own interleaved schedule is not
  // published; Megatron's holds more (docs/PLANNER.md).
  std::vector<ValidationRow> llama;
  ASSERT_TRUE(loadValidationFile(root + "/planner/validation/llama3_405b.json", root, &llama).ok());
  for (const ValidationRow& r : llama) {
    Layout l = r.layout;
    l.schedule = PipeSchedule::OneFOneB, l.vp = 1;
    const Prediction p = StepModel(r.model, r.hw).predict(l, true);
    EXPECT_TRUE(p.fits) << r.name << ": " << p.memory.describe();
    EXPECT_GT(p.memory.total(), 0.85 * r.hw.memoryBytes) << r.name << ": " << p.memory.describe();
  }
}

// --simulate against the analytic model. Without overlap the data-parallel tail is the reduction
// after the last pass in both, so the steps agree; with pipelines, the per-rank event run (with
// its rendezvous and messages) ends its passes where the per-stage pipeline simulation does.
TEST(PlannerJobSim, AgreesWithTheAnalyticModelWhereBothAreExact) {
  ModelSpec m;
  m.layers = 8, m.hidden = 4096, m.heads = 32, m.kvHeads = 8, m.ffn = 14336, m.vocab = 32000, m.seq = 4096;
  m.gatedMlp = true, m.globalBatch = 64;
  for (bool overlap : {false, true})
    for (PipeSchedule sched : {PipeSchedule::OneFOneB, PipeSchedule::Interleaved, PipeSchedule::ZeroBubble}) {
      StepOptions opt;
      opt.dpOverlap = overlap;
      StepModel sm(m, h100(4), opt);
      Layout l;
      l.tp = 2, l.pp = 4, l.dp = 4, l.zero = 1, l.schedule = sched, l.vp = sched == PipeSchedule::Interleaved ? 2 : 1;
      ASSERT_EQ(checkLayout(l, m, 32, 8), "");
      const Prediction p = sm.predict(l, true);
      const JobSimResult r = simulateJob(m, p, sm.coster(), overlap);
      SCOPED_TRACE(l.describe() + (overlap ? " overlap" : " no overlap"));
      const long passesPerRank = (sched == PipeSchedule::ZeroBubble ? 3 : 2) * l.microbatches(m) * l.vp;
      EXPECT_EQ(r.ranks, 32);
      EXPECT_EQ(r.passes, 32 * passesPerRank);
      EXPECT_GT(r.messages, 0);
      EXPECT_GT(r.rendezvous, 0);
      EXPECT_NEAR(r.makespan, p.pipe.makespan, 1e-9 * p.pipe.makespan);
      // Both reduce layer by layer from each chunk's last gradient pass (the analytic model from
      // the stage's simulated pass times): the same step, with and without overlap.
      EXPECT_NEAR(r.step, p.step, 1e-9 * p.step);
      EXPECT_NEAR(r.dpTail, p.comms.back().exposed, 1e-9 * p.step);
      if (!overlap) {
        EXPECT_NEAR(r.dpTail, p.comms.back().total, 1e-9 * p.step);  // the whole reduction, exposed
      } else {
        // Layer buckets reduced during the last backward: less exposed than all after it.
        const JobSimResult after = simulateJob(m, p, sm.coster(), false);
        EXPECT_LT(r.dpTail, after.dpTail);
      }
      EXPECT_GE(r.dpTail, 0);
    }
}

// One stage, one microbatch: the last backward produces layer j of L at j/L of its length; a
// bucket reduction shorter than a layer's backward is hidden except the last one's.
TEST(PlannerStep, OverlappedReductionExposesOnlyTheLastBucket) {
  ModelSpec m;
  m.layers = 8, m.hidden = 4096, m.heads = 32, m.kvHeads = 8, m.ffn = 14336, m.vocab = 32000, m.seq = 4096;
  m.gatedMlp = true, m.globalBatch = 8;
  StepModel sm(m, h100(1));
  Layout l;
  l.dp = 8, l.zero = 0;
  ASSERT_EQ(checkLayout(l, m, 8, 8), "");
  const Prediction p = sm.predict(l, true);
  ASSERT_EQ(p.plan.dpCalls.size(), 1u);
  const GroupCall& ar = p.plan.dpCalls[0];
  const double bucket = sm.coster().collective(ar.group, ar.coll, ar.bytes / m.layers).seconds;
  const auto [from, to] = p.pipe.lastGrad[0][0];
  ASSERT_LT(bucket, (to - from) / m.layers);  // each bucket done before the next is ready
  EXPECT_NEAR(p.comms.back().exposed, bucket, 1e-12);
  EXPECT_NEAR(p.step, p.pipe.makespan + bucket + p.optimizer, 1e-12);
}

TEST(PlannerJobSim, SixteenThousandRanksInSeconds) {
  HardwareSpec hw;
  ASSERT_TRUE(loadClusterFile(TOPO_FILES_DIR "/dgx_h100_2048n.json", &hw).ok());
  ModelSpec m;
  ASSERT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/llama3_405b.json", &m).ok());
  StepModel sm(m, hw);
  Layout l;
  l.tp = 8, l.cp = 1, l.dp = 128, l.pp = 16, l.zero = 1, l.sp = true;
  ASSERT_EQ(checkLayout(l, m, 16384, 8), "");
  const Prediction p = sm.predict(l, true);
  const JobSimResult r = simulateJob(m, p, sm.coster(), true);
  EXPECT_EQ(r.ranks, 16384);
  EXPECT_EQ(r.passes, 16384L * 2 * l.microbatches(m));
  EXPECT_LT(r.wallSeconds, 30.0);
  EXPECT_NEAR(r.makespan, p.pipe.makespan, 1e-9 * p.pipe.makespan);
  std::printf("%s", describeJobSim(r, p).c_str());
}

// Ranks sharing cores (the trainer's CPU ranks): one core under two stages of one rank each never
// idles while a pass is runnable, so GPipe's bubble disappears and the step is the total work;
// with a core per busy rank the pipeline is the dedicated one.
TEST(PlannerPipeline, SharedCoresFillTheBubble) {
  const int pp = 2;
  const long m = 8;
  const std::vector<PassCost> cost(size_t(pp), PassCost{1.0, 1.0, 0.0});
  const PipelineResult dedicated = simulatePipeline(PipeSchedule::GPipe, pp, 1, m, cost, 0.0);
  EXPECT_NEAR(dedicated.makespan, 2.0 * (m + pp - 1), 1e-9);  // (m + p - 1) forward and backward slots
  CoreSharing one;
  one.ranksPerStage = 1, one.cores = 1;
  const PipelineResult shared = simulatePipeline(PipeSchedule::GPipe, pp, 1, m, cost, 0.0, one);
  EXPECT_NEAR(shared.makespan, 2.0 * 2 * m, 1e-9);  // all 2 x 2m passes back to back on the core
  CoreSharing plenty;
  plenty.ranksPerStage = 4, plenty.cores = 16;  // a core for every rank of the 4 stages
  const PipelineResult wide = simulatePipeline(PipeSchedule::OneFOneB, 4, 1, m, std::vector<PassCost>(4, cost[0]), 0.0,
                                               plenty);
  EXPECT_NEAR(wide.makespan, simulatePipeline(PipeSchedule::OneFOneB, 4, 1, m, std::vector<PassCost>(4, cost[0]), 0.0)
                                 .makespan, 1e-9);
  // One stage of 8 ranks on 2 cores: 4 times the dedicated time.
  CoreSharing crowd;
  crowd.ranksPerStage = 8, crowd.cores = 2;
  const PipelineResult flat = simulatePipeline(PipeSchedule::OneFOneB, 1, 1, m, {cost[0]}, 0.0, crowd);
  EXPECT_NEAR(flat.makespan, 4.0 * 2 * m, 1e-9);
  EXPECT_NEAR(flat.bubble, 0.0, 1e-12);
}

// --host-ranks: the trainer's own loops measured here give positive rates, the ranks share the
// CPUs, groups talk through shared memory, and a one-rank prediction at those rates is the
// compute the step model adds up.
TEST(PlannerHost, CalibratedHostRanksShareCores) {
  ModelSpec m;
  ASSERT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/trainer_small.json", &m).ok());
  const HostCalibration cal = calibrateHost(m);
  EXPECT_GT(cal.gemmFlops, 1e8);
  EXPECT_GT(cal.attnFlops, 1e7);
  EXPECT_GT(cal.memBytes, 1e7);
  const HardwareSpec hw = hostHardware(8, 2, cal);
  EXPECT_EQ(hw.gpus(), 8);
  EXPECT_EQ(hw.sharedCores, 2);
  EXPECT_EQ(hw.oversubscription(8), 4.0);
  StepModel sm(m, hw);
  Layout dp8;
  dp8.dp = 8;
  ASSERT_EQ(checkLayout(dp8, m, 8, 8), "");
  const Prediction p = sm.predict(dp8, true);
  const double single = oneRankStep(m, cal);
  // 8 ranks each doing an eighth of the work, 4 to a core: half the one-rank compute, plus the
  // (shared-memory) gradient reduction and the optimizer of every rank.
  EXPECT_GT(p.step, single / 2);
  EXPECT_LT(p.step, single);
  EXPECT_EQ(groupShape(dp8.spec(), 1u << 3, 8).key(), "1x{0,1,2,3,4,5,6,7}");
  EXPECT_EQ(shapeLayout(groupShape(dp8.spec(), 1u << 3, 8), 1, hw).link(0, 1), topology::LinkClass::SharedMemory);
  EXPECT_GT(cal.optimizerBytes, 1e7);
  EXPECT_DOUBLE_EQ(hw.optimizerBytesPerSec, cal.optimizerBytes);
}

// The reference trainer's layouts on CPU ranks: context parallelism at 64 tokens, and MoE with its
// experts whole on every tp rank (etp1). Whole experts are not divided by tp in memory, their
// gradients are reduced over dp x cp x tp (the dense ones over dp x cp x ep), and the tp
// collectives per layer are the attention's pair only.
TEST(PlannerHost, TrainerLayoutsContextAndWholeExperts) {
  ModelSpec m;
  ASSERT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/trainer_moe.json", &m).ok());
  SearchSpace space;
  space.maxCp = 8, space.wholeExperts = true, space.zeroStages = {0}, space.mbsChoices = {1};
  std::set<std::string> names;
  for (const Layout& l : enumerateLayouts(m, 8, 8, space)) names.insert(l.describe());
  EXPECT_TRUE(names.count("tp1 cp8 ep1 dp1 pp1 v1 mbs1 1f1b zero0 rc=none"));
  EXPECT_TRUE(names.count("tp2 cp1 ep4 dp1 pp1 v1 mbs1 1f1b zero0 rc=none etp1"));
  EXPECT_FALSE(names.count("tp2 cp1 ep4 dp1 pp1 v1 mbs1 1f1b zero0 rc=none"));  // only whole experts on CPU ranks
  SearchSpace gpu = space;  // the default for GPU clusters: cp from 4K tokens on
  gpu.maxCp = 0;
  for (const Layout& g : enumerateLayouts(m, 8, 8, gpu)) EXPECT_EQ(g.cp, 1) << g.describe();

  Layout l;
  l.tp = 2, l.ep = 2, l.dp = 2, l.zero = 0, l.wholeExperts = true;
  ASSERT_EQ(checkLayout(l, m, 8, 8), "");
  const double expertsPerLayer = 8.0 * 2 * 128 * 512;  // fc and proj weights (the planner counts no biases)
  EXPECT_NEAR(stageExpertParams(m, l, 0), m.layers * expertsPerLayer / 2, 1.0);  // / ep, not / tp
  Layout split = l;
  split.wholeExperts = false;
  EXPECT_NEAR(stageExpertParams(m, split, 0), m.layers * expertsPerLayer / 4, 1.0);

  HostCalibration cal;
  cal.gemmFlops = 2e10, cal.attnFlops = 5e9, cal.memBytes = 4e9, cal.optimizerBytes = 6e9;
  const HardwareSpec hw = hostHardware(8, 2, cal);
  const Prediction p = StepModel(m, hw).predict(l, true);
  ASSERT_EQ(p.plan.dpCalls.size(), 2u);
  EXPECT_EQ(p.plan.dpCalls[0].dims, (1u << 1) | (1u << 2) | (1u << 3));  // dense: cp, ep, dp
  EXPECT_EQ(p.plan.dpCalls[1].dims, (1u << 0) | (1u << 1) | (1u << 3));  // experts: tp, cp, dp
  EXPECT_NEAR(p.plan.dpCalls[1].bytes, stageExpertParams(m, l, 0) * m.gradBytes, 1.0);
  int tpCalls = 0;
  for (const GroupCall& c : p.plan.layerCalls)
    if (c.dims == 1u) tpCalls += c.perFwd;
  EXPECT_EQ(tpCalls, 2);  // one all-gather and one reduce-scatter: the attention's
}

// Sibling groups share a node's NIC: on a node of 4 ranks with one rail, the 4 one-rank-per-node
// groups of a dimension send at once, so each gets a quarter of the rail; a group holding every
// rank of the node, or a rail per rank, gets all of it. Checked on the host's virtual clusters
// (strata-run --nodes 2 --ppn 4 --rail-rate 200mbit) and on the DGX file (a rail per GPU).
TEST(PlannerComm, SiblingGroupsShareANodesRails) {
  HostCalibration cal;
  cal.gemmFlops = 1e10, cal.attnFlops = 1e9, cal.memBytes = 1e9;
  HostNetwork net;
  net.nodes = 2, net.rails = 1, net.railBitsPerSec = 200e6;
  const HardwareSpec hw = hostHardware(8, 2, cal, net);
  EXPECT_EQ(hw.nodes, 2);
  EXPECT_EQ(hw.gpusPerNode, 4);
  const double railBw = 200e6 / 8 * 1448.0 / 1514.0;  // payload bytes/s of a 200 Mbit/s tbf
  EXPECT_NEAR(hw.costs[size_t(topology::LinkClass::Rail)].bandwidthGBps * 1e9, railBw, 1);
  Layout pp2;
  pp2.tp = 4, pp2.pp = 2;  // tp inside a node; pp: rank 0 and 4, one per node
  const GroupShape pp = groupShape(pp2.spec(), 1u << 4, 4);
  EXPECT_EQ(pp.key(), "2x{0}");
  EXPECT_EQ(railSharing(pp, hw), 4);
  CommCoster c(hw);
  const double bytes = 1e6;
  EXPECT_NEAR(c.p2p(pp, bytes), 50e-6 + 4 * bytes / railBw, 1e-9);
  Layout tp8;
  tp8.tp = 8;  // one group holding both nodes' ranks: the rail is its own
  const GroupShape all = groupShape(tp8.spec(), 1u << 0, 4);
  EXPECT_EQ(railSharing(all, hw), 1);
  HostNetwork fourRails = net;
  fourRails.rails = 4;
  EXPECT_EQ(railSharing(pp, hostHardware(8, 2, cal, fourRails)), 1);
  HardwareSpec two = h100(2);
  two.rails = 2;  // 8 GPUs on 2 NICs: ranks 0, 2, 4, 6 on rail 0
  EXPECT_EQ(railSharing(groupShape(pp2.spec(), 1u << 4, 8), h100(2)), 1);
  Layout dp2;
  dp2.tp = 8, dp2.dp = 2;
  EXPECT_EQ(railSharing(groupShape(dp2.spec(), 1u << 3, 8), two), 4);
  EXPECT_EQ(railSharing(groupShape(dp2.spec(), 1u << 3, 8), h100(2)), 1);
}

// The rank-order search: the pipeline-inside-data order (tp-cp-ep-pp-dp) is a candidate only where
// it moves some group onto other nodes or GPUs. On 2 nodes of 4 CPU ranks, dp2 pp4 under it keeps
// each pipeline inside a node and sends the gradients across; under the default the pipeline
// crosses. With a full node of tensor parallelism (tp8 on DGX) both orders give every dp and pp
// group one GPU per node on the same rail: no alternative is listed.
TEST(PlannerPlan, RankOrderSearchKeepsOrdersThatMoveGroups) {
  ModelSpec m;
  ASSERT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/trainer_small.json", &m).ok());
  SearchSpace space;
  space.zeroStages = {0};
  space.mbsChoices = {1};
  int alternatives = 0;
  for (const Layout& l : enumerateLayouts(m, 8, 4, space)) {
    if (l.order == kDefaultRankOrder) continue;
    ++alternatives;
    EXPECT_EQ(l.order, kPipelineInsideDataOrder);
    EXPECT_GT(l.dp, 1);
    EXPECT_GT(l.pp, 1);
    EXPECT_NE(l.describe().find(" order tp-cp-ep-pp-dp"), std::string::npos);
  }
  EXPECT_GT(alternatives, 0);
  Layout l;
  l.dp = 2, l.pp = 4, l.order = kPipelineInsideDataOrder;
  EXPECT_EQ(groupShape(l.spec(), 1u << 4, 4).key(), "1x{0,1,2,3}");
  EXPECT_EQ(groupShape(l.spec(), 1u << 3, 4).key(), "2x{0}");
  l.order = kDefaultRankOrder;
  EXPECT_EQ(groupShape(l.spec(), 1u << 4, 4).key(), "2x{0,2}");
  EXPECT_EQ(groupShape(l.spec(), 1u << 3, 4).key(), "1x{0,1}");

  ModelSpec big;
  ASSERT_TRUE(loadModelFile(std::string(PLANNER_MODELS_DIR) + "/llama3_70b.json", &big).ok());
  space.mbsChoices = {1};
  space.allSchedules = false;
  int full = 0;
  for (const Layout& k : enumerateLayouts(big, 1024, 8, space)) {
    if (k.order == kDefaultRankOrder) continue;
    EXPECT_LT(k.tp * k.cp * k.ep, 8) << k.describe();
    full += k.tp * k.cp * k.ep < 8;
  }
  EXPECT_GT(full, 0);
}
