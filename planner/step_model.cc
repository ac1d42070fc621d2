// step_model.cc: a layout's step time and memory (see step_model.h).
#include "planner/step_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "schedule.h"  // examples/trainer: the schedules as data

namespace strata::planner {

static constexpr unsigned kTp = 1u << 0, kCp = 1u << 1, kEp = 1u << 2, kDp = 1u << 3, kPp = 1u << 4;

int chunkLayers(const ModelSpec& m, int c, int C) {
  const int base = m.layers / C, extra = m.layers % C;
  return base + (c >= 1 && c <= extra ? 1 : 0);
}

int peakInFlight(const Layout& l, long microbatches) {
  trainer::Config cfg;
  cfg.pp = l.pp, cfg.virtualStages = l.vp, cfg.microbatches = int(microbatches);
  cfg.schedule = scheduleName(l.schedule);
  const bool split = trainer::splitBackward(cfg);
  int held = 0, most = 0;
  for (const trainer::Action& a : trainer::scheduleFor(cfg, 0)) {
    if (a.op == trainer::Op::F) most = std::max(most, ++held);
    else if (a.op == trainer::Op::W || !split) --held;
  }
  return most;
}

StepModel::StepModel(const ModelSpec& m, const HardwareSpec& hw, StepOptions opt)
    : m_(m), hw_(hw), opt_(opt), coster_(hw), laneCoster_(hw, hw.oversubscription(hw.gpus())) {}

static std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / double(1 << 20)); }

// The data-parallel reduction overlapped with the backward, bucket by layer as the trainer
// reduces: layer j of a chunk's n has its gradients j/n of the way through the chunk's last
// gradient pass (pipeline.h: lastGrad); each stage's lane reduces the buckets in that order, each
// call timed at the bucket's size (latency paid per bucket). Returns how far the slowest stage's
// lane runs past the last pass. Every stage's group is costed with the busiest stage's parameters.
// On shared cores the lane's local work is slowed by the other ranks (laneCoster_).
double StepModel::laneSeconds(const StepPlan& plan, double share) {
  double t = 0;
  for (const GroupCall& c : plan.dpCalls) {
    const CommTime chosen = coster_.collective(c.group, c.coll, c.bytes * share);  // the runtime's pick at this size
    t += hw_.sharedCores > 0 ? laneCoster_.seconds(c.group, c.coll, chosen.algo, c.bytes * share) : chosen.seconds;
  }
  return t;
}

double StepModel::overlappedTail(const Prediction& p) {
  const int P = p.layout.pp, V = p.layout.vp, C = P * V;
  double tail = 0;
  std::vector<double> buckets;  // when each layer's gradients are complete
  for (int s = 0; s < P; ++s) {
    int stageLayers = 0;
    for (int v = 0; v < V; ++v) stageLayers += chunkLayers(m_, v * P + s, C);
    const double share = 1.0 / std::max(stageLayers, 1);
    const double perBucket = laneSeconds(p.plan, share);
    buckets.clear();
    for (int v = 0; v < V; ++v) {
      const int n = chunkLayers(m_, v * P + s, C);
      const auto [a, b] = p.pipe.lastGrad[size_t(s)][size_t(v)];
      for (int j = 1; j <= n; ++j) buckets.push_back(a + (b - a) * j / n);
    }
    std::sort(buckets.begin(), buckets.end());
    double lane = 0;
    for (double ready : buckets) lane = std::max(lane, ready) + perBucket;
    tail = std::max(tail, lane - p.pipe.makespan);
  }
  return tail;
}

Prediction StepModel::predict(const Layout& l, bool evenIfOver) {
  Prediction p;
  p.layout = l;
  const long M = l.microbatches(m_);
  const int inflight = peakInFlight(l, M);
  p.memory = memoryPerGpu(m_, l, hw_, inflight);
  if (p.memory.total() > hw_.memoryBytes) {
    p.reject = fmt::format("needs {} (> {:.0f} GiB)", p.memory.describe(), hw_.memoryBytes / double(1ull << 30));
    if (!evenIfOver) return p;
  } else {
    p.fits = true;
  }
  const ParallelSpec spec = l.spec();
  const int ppn = hw_.gpusPerNode;
  const double T = double(l.mbs) * m_.seq / l.cp;  // tokens per microbatch on one GPU
  const double actBytes = T * m_.hidden * m_.paramBytes;
  const PassCost layer = layerCost(m_, l, hw_);
  const int fwdSets = l.recompute == Recompute::Full ? 2 : 1;  // forward collectives run again
  const int C = l.pp * l.vp;
  const long passes = M * C / l.pp;  // (microbatch, chunk) passes per stage
  const double layersPerStage = double(m_.layers) / l.pp;

  // Per layer and microbatch: tensor, context and expert parallel communication (on the critical path).
  PassCost perLayer = layer;
  PassCost hidden = layer;  // compute plus the exposed excess of overlapped exchanges (cp, ZeRO-3)
  if (l.tp > 1) {
    const GroupShape g = groupShape(spec, kTp, ppn);
    DimComm d{"tp", "", g.key()};
    double fwd, bwd;
    const int n = l.wholeExperts ? 1 : 2;  // attention and MLP; whole experts work on the SP slice
    if (l.sp) {
      const CommTime ag = coster_.collective(g, CollType::AllGather, actBytes);
      const CommTime rs = coster_.collective(g, CollType::ReduceScatter, actBytes);
      fwd = n * (ag.seconds + rs.seconds), bwd = fwd;
      d.algo = ag.algo, d.perCall = ag.seconds;
      p.plan.layerCalls.push_back({g, CollType::AllGather, ag.algo, actBytes, n, n * fwdSets, ag.seconds, kTp});
      p.plan.layerCalls.push_back({g, CollType::ReduceScatter, rs.algo, actBytes, n, n * fwdSets, rs.seconds, kTp});
      d.what = fmt::format("{} all-gathers ({}) + {} reduce-scatters ({}) per layer and pass, {}", n, algoName(ag.algo), n,
                           algoName(rs.algo), mib(actBytes));
    } else {
      const CommTime ar = coster_.collective(g, CollType::AllReduce, actBytes);
      fwd = n * ar.seconds, bwd = fwd;
      d.algo = ar.algo, d.perCall = ar.seconds;
      p.plan.layerCalls.push_back({g, CollType::AllReduce, ar.algo, actBytes, n, n * fwdSets, ar.seconds, kTp});
      d.what = fmt::format("{} all-reduces ({}) per layer and pass, {}", n, algoName(ar.algo), mib(actBytes));
    }
    perLayer.fwd += fwd;
    perLayer.bwdInput += bwd + (fwdSets - 1) * fwd;
    d.total = d.exposed = (fwd * fwdSets + bwd) * layersPerStage * double(M);
    p.comms.push_back(d);
  }
  if (l.cp > 1) {
    const GroupShape g = groupShape(spec, kCp, ppn);
    const double kv = 2 * T * m_.kvHeads * m_.headDim() * m_.paramBytes / l.tp;
    // Forward: K,V blocks travel cp-1 hops. Backward: each block travels again with its dK,dV
    // accumulator and takes one more hop home (cp hops of twice the bytes).
    const double step = coster_.p2p(g, kv), stepB = coster_.p2p(g, 2 * kv);
    double core = 0;
    layerForwardFlops(m_, T, l.tp, &core);
    const double ringF = (l.cp - 1) * step, ringB = l.cp * stepB;
    const double hideF = opt_.cpOverlap ? core / hw_.attentionRate() : 0, hideB = 2 * hideF;
    const double expF = std::max(0.0, ringF - hideF), expB = std::max(0.0, ringB - hideB);
    perLayer.fwd += expF;
    perLayer.bwdInput += expB + (fwdSets - 1) * expF;
    hidden.fwd += expF;
    hidden.bwdInput += expB + (fwdSets - 1) * expF;
    DimComm d{"cp", fmt::format("ring exchange of K,V: {} hops of {} per layer forward, {} of {} backward ({})", l.cp - 1,
                                mib(kv), l.cp, mib(2 * kv), opt_.cpOverlap ? "overlapped with attention" : "blocking"),
              g.key()};
    d.perCall = step;
    d.total = (ringF * fwdSets + ringB) * layersPerStage * M;
    d.exposed = (expF * fwdSets + expB) * layersPerStage * M;
    p.comms.push_back(d);
  }
  if (m_.moe() && l.tp * l.cp > 1) {  // routing statistics (load-balancing loss) summed over the tokens' tp x cp slices
    const GroupShape g = groupShape(spec, kTp | kCp, ppn);
    const double bytes = 2.0 * m_.experts * 4;
    const CommTime ar = coster_.collective(g, CollType::AllReduce, bytes);
    perLayer.fwd += ar.seconds;
    perLayer.bwdInput += (fwdSets - 1) * ar.seconds;
    p.plan.layerCalls.push_back({g, CollType::AllReduce, ar.algo, bytes, 1, fwdSets - 1, ar.seconds, kTp | kCp});
  }
  if (l.ep > 1) {
    // Each rank routes its own tokens (its sequence-parallel slice with SP): the dispatch sends
    // topk rows per token to the experts' owners after an all-to-all of the counts, the combine
    // brings them back; the backward mirrors both (counts known).
    const GroupShape g = groupShape(spec, kEp, ppn);
    const double routed = T / (l.sp ? l.tp : 1) * m_.topk;  // (token, expert) rows a rank routes per microbatch
    const double bytes = routed * m_.hidden * m_.paramBytes;
    const CommTime a2a = coster_.collective(g, CollType::AllToAll, bytes);
    const CommTime counts = coster_.collective(g, CollType::AllToAll, 4.0 * m_.experts);
    const double fwd = 2 * a2a.seconds + counts.seconds;
    perLayer.fwd += fwd;
    perLayer.bwdInput += 2 * a2a.seconds + (fwdSets - 1) * fwd;
    p.plan.layerCalls.push_back({g, CollType::AllToAll, a2a.algo, bytes, 2, 2 * fwdSets, a2a.seconds, kEp});
    p.plan.layerCalls.push_back({g, CollType::AllToAll, counts.algo, 4.0 * m_.experts, 1, fwdSets - 1, counts.seconds, kEp});
    // The experts of the busiest rank set the pace (expertImbalance): its excess in every pass.
    const double excess = (expertImbalance(l.ep, routed * l.ep) - 1) * expertForwardSeconds(m_, l, hw_);
    perLayer.fwd += excess, perLayer.bwdInput += excess * fwdSets, perLayer.bwdWeight += excess;
    hidden.fwd += excess, hidden.bwdInput += excess * fwdSets, hidden.bwdWeight += excess;
    DimComm d{"ep", fmt::format("2 all-to-alls ({}) per layer and pass, {}, and one of the counts per forward",
                                algoName(a2a.algo), mib(bytes)),
              g.key()};
    d.algo = a2a.algo, d.perCall = a2a.seconds;
    d.total = d.exposed = (fwd * fwdSets + 2 * a2a.seconds) * layersPerStage * M;
    p.comms.push_back(d);
  }
  const double perLayerParams = layerParams(m_, l);
  if (l.zero >= 3) {  // weights gathered before each layer's forward and backward (prefetched)
    const GroupShape g = groupShape(spec, kDp | kCp | kEp, ppn);
    const CommTime ag = coster_.collective(g, CollType::AllGather, perLayerParams * m_.paramBytes);
    const CommTime rs = coster_.collective(g, CollType::ReduceScatter, perLayerParams * m_.gradBytes);
    const double expF = std::max(0.0, ag.seconds - layer.fwd), expB = std::max(0.0, ag.seconds + rs.seconds - layer.bwd());
    perLayer.fwd += expF;
    perLayer.bwdInput += expB;
    hidden.fwd += expF;
    hidden.bwdInput += expB;
    DimComm d{"dp", fmt::format("ZeRO-3: all-gather ({}) of {} per layer and pass, reduce-scatter of gradients",
                                algoName(ag.algo), mib(perLayerParams * m_.paramBytes)),
              g.key()};
    d.algo = ag.algo, d.perCall = ag.seconds;
    d.total = (2 * ag.seconds + rs.seconds) * layersPerStage * M;
    d.exposed = (expF + expB) * layersPerStage * M;
    p.comms.push_back(d);
  }

  // Chunk costs: layers spread over chunks (the remainder from chunk 1 on), logits on the last.
  std::vector<PassCost> chunks(static_cast<size_t>(C));
  const PassCost logits = logitsCost(m_, l, hw_);
  for (int c = 0; c < C; ++c) {
    const int n = chunkLayers(m_, c, C);
    PassCost& pc = chunks[size_t(c)];
    pc.fwd = n * perLayer.fwd, pc.bwdInput = n * perLayer.bwdInput, pc.bwdWeight = n * perLayer.bwdWeight;
    if (c == C - 1) pc.fwd += logits.fwd, pc.bwdInput += logits.bwdInput, pc.bwdWeight += logits.bwdWeight;
  }
  double ppHop = 0;
  if (l.pp > 1) {
    const GroupShape g = groupShape(spec, kPp, ppn);
    const double bytes = actBytes / (l.sp ? l.tp : 1);
    ppHop = coster_.p2p(g, bytes);
    p.plan.ppHop = ppHop;
    DimComm d{"pp", fmt::format("send/recv of {} per microbatch and chunk boundary", mib(bytes)), g.key()};
    d.perCall = ppHop;
    d.total = 2 * ppHop * double(passes);
    p.comms.push_back(d);
  }
  CoreSharing share;
  if (hw_.sharedCores > 0) share.ranksPerStage = l.world() / l.pp, share.cores = hw_.sharedCores;
  p.pipe = simulatePipeline(l.schedule, l.pp, l.vp, M, chunks, ppHop, share);
  const double crowd = hw_.oversubscription(l.world());  // all ranks reduce and step together
  if (l.pp > 1) p.comms.back().exposed = p.comms.back().total;  // blocking transfers (in the makespan)

  // Data parallel: after the last backward, gradients reduced over their replicas: dense ones over
  // dp x cp x ep, experts over dp x cp (x tp when whole); with ZeRO 1/2 reduce-scattered and the
  // updated weights all-gathered.
  double dpExposed = 0;
  const double localParams = p.memory.localParams, expertParams = p.memory.localExpertParams;
  const unsigned expertDims = kDp | kCp | (l.wholeExperts ? kTp : 0u);
  const int expertReplicas = l.dp * l.cp * (l.wholeExperts ? l.tp : 1);
  std::vector<std::string> parts;
  auto reduce = [&](unsigned dims, double params, const char* what) {
    const GroupShape g = groupShape(spec, dims, ppn);
    const double grads = params * m_.gradBytes, weights = params * m_.paramBytes;
    double t;
    if (l.zero == 0) {
      const CommTime ar = coster_.collective(g, CollType::AllReduce, grads);
      p.plan.dpCalls.push_back({g, CollType::AllReduce, ar.algo, grads, 0, 0, ar.seconds, dims});
      t = ar.seconds;
      parts.push_back(fmt::format("all-reduce ({}) of {} of {} gradients over {}", algoName(ar.algo), mib(grads), what,
                                  g.key()));
    } else {
      const CommTime rs = coster_.collective(g, CollType::ReduceScatter, grads);
      const CommTime ag = coster_.collective(g, CollType::AllGather, weights);
      p.plan.dpCalls.push_back({g, CollType::ReduceScatter, rs.algo, grads, 0, 0, rs.seconds, dims});
      p.plan.dpCalls.push_back({g, CollType::AllGather, ag.algo, weights, 0, 0, ag.seconds, dims});
      t = rs.seconds + ag.seconds;
      parts.push_back(fmt::format("reduce-scatter ({}) of {} of {} gradients + all-gather ({}) of {} of weights over {}",
                                  algoName(rs.algo), mib(grads), what, algoName(ag.algo), mib(weights), g.key()));
    }
    return t;
  };
  if (l.zero < 3) {
    double t = 0;
    if (l.dp * l.cp * l.ep > 1) t += reduce(kDp | kCp | kEp, localParams - expertParams, m_.moe() ? "dense" : "the");
    if (expertParams > 0 && expertReplicas > 1) t += reduce(expertDims, expertParams, "expert");
    if (!parts.empty()) {
      DimComm d{"dp", "", groupShape(spec, kDp | kCp | kEp, ppn).key()};
      d.algo = p.plan.dpCalls.front().algo;
      d.what = fmt::format("{} per step", fmt::join(parts, ", "));
      d.perCall = t, d.total = t;
      dpExposed = opt_.dpOverlap ? overlappedTail(p) : laneSeconds(p.plan, 1.0);
      d.exposed = dpExposed;
      p.comms.push_back(d);
    }
  }
  p.optimizer = optimizerSeconds(localParams, l, m_, hw_) * crowd;
  p.plan.layerCompute = hidden;
  p.plan.logitsCompute = logits;
  p.plan.localParams = localParams;
  p.step = p.pipe.makespan + dpExposed + p.optimizer;
  // Compute alone (tensor, context and expert communication excluded), per GPU of the busiest stage.
  p.computePerStep = double(M) / l.pp * (m_.layers * (layer.fwd + layer.bwd()) + logits.fwd + logits.bwd());
  const double tokens = double(m_.globalBatch) * m_.seq;
  p.tokensPerSec = tokens / p.step;
  const double flops = modelFlopsPerStep(m_);
  p.tflopsPerGpu = flops / p.step / l.world() / 1e12;
  p.mfu = p.tflopsPerGpu * 1e12 / hw_.peakFlops;
  return p;
}

}  // namespace strata::planner
