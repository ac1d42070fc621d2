// plan.cc: ranking layouts and reporting the plan (see plan.h).
#include "planner/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace strata::planner {

PlanResult makePlan(const ModelSpec& m, const HardwareSpec& hw, const SearchSpace& space, const StepOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  StepModel model(m, hw, opt);
  const std::vector<Layout> layouts = enumerateLayouts(m, hw.gpus(), hw.gpusPerNode, space);
  r.candidates = int(layouts.size());
  for (const Layout& l : layouts) {
    Prediction p = model.predict(l);
    (p.fits ? r.ranked : r.rejected).push_back(std::move(p));
  }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Prediction& a, const Prediction& b) { return a.step < b.step; });
  std::stable_sort(r.rejected.begin(), r.rejected.end(),
                   [](const Prediction& a, const Prediction& b) { return a.memory.total() < b.memory.total(); });
  r.simulations = model.coster().simulations();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

static constexpr double kGiB = double(1ull << 30);

std::string predictionDetail(const Prediction& p, const ModelSpec& m, const HardwareSpec& hw) {
  std::string s = fmt::format("  {}: step {:.3f} s, {:.0f} tokens/s, {:.0f} TFLOP/s per GPU, MFU {:.1f}%\n",
                              p.layout.describe(), p.step, p.tokensPerSec, p.tflopsPerGpu, 100 * p.mfu);
  s += fmt::format("    pipeline: {} microbatches, makespan {:.3f} s, bubble {:.1f}% (simulated; formula {:.1f}%), "
                   "compute {:.3f} s per GPU, optimizer {:.3f} s\n",
                   p.layout.microbatches(m), p.pipe.makespan, 100 * p.pipe.bubble,
                   100 * formulaBubble(p.layout.schedule, p.layout.pp, p.layout.vp, p.layout.microbatches(m)),
                   p.computePerStep, p.optimizer);
  for (const DimComm& d : p.comms)
    s += fmt::format("    {:<3} group {:<14} {:.3f} s per step, exposed {:.3f} s: {}\n", d.dim, d.group, d.total,
                     d.exposed, d.what);
  s += fmt::format("    memory per GPU: {} of {:.0f} GiB\n", p.memory.describe(), hw.memoryBytes / kGiB);
  return s;
}

std::string explainWinner(const Prediction& a, const Prediction& b) {
  struct Term {
    std::string name;
    double a, b;
  };
  auto comm = [](const Prediction& p, const std::string& dim) {
    double t = 0;
    for (const DimComm& d : p.comms)
      if (d.dim == dim) t += d.exposed;
    return t;
  };
  std::vector<Term> terms{{"compute", a.computePerStep, b.computePerStep},
                          {"pipeline bubble", a.pipe.makespan * a.pipe.bubble, b.pipe.makespan * b.pipe.bubble},
                          {"optimizer", a.optimizer, b.optimizer}};
  for (const char* d : {"tp", "cp", "ep", "pp", "dp"}) terms.push_back({std::string(d) + " communication (exposed)", comm(a, d), comm(b, d)});
  std::sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) {
    return std::abs(x.b - x.a) > std::abs(y.b - y.a);
  });
  std::string s = fmt::format("winner {} vs runner-up {}: {:.3f} s vs {:.3f} s ({:+.1f}%)\n", a.layout.describe(),
                              b.layout.describe(), a.step, b.step, 100 * (b.step - a.step) / a.step);
  for (size_t i = 0; i < terms.size() && i < 3; ++i)
    if (std::abs(terms[i].b - terms[i].a) > 1e-6)
      s += fmt::format("  {}: {:.3f} s vs {:.3f} s ({:+.3f} s)\n", terms[i].name, terms[i].a, terms[i].b,
                       terms[i].b - terms[i].a);
  s += fmt::format("  memory: {:.1f} GiB vs {:.1f} GiB\n", a.memory.total() / kGiB, b.memory.total() / kGiB);
  return s;
}

std::string trainerFlags(const Prediction& p, const ModelSpec& m) {
  const Layout& l = p.layout;
  std::string s = fmt::format("--tp {} --cp {} --ep {} --dp {} --pp {} --zero {} --schedule {} --microbatches {}", l.tp,
                              l.cp, l.ep, l.dp, l.pp, std::min(l.zero, 3), scheduleName(l.schedule), l.microbatches(m));
  if (l.vp > 1) s += fmt::format(" --virtual-stages {}", l.vp);
  if (l.sp && l.tp > 1) s += " --sp";
  s += fmt::format(" --order {} --layers {} --hidden {} --heads {} --seq {} --vocab {} --batch {}", l.order, m.layers,
                   m.hidden, m.heads, m.seq, m.vocab, m.globalBatch);
  if (m.moe()) s += fmt::format(" --experts {} --topk {}", m.experts, m.topk);
  return s;
}

std::string rankTable(const Layout& l, int gpusPerNode) {
  const ParallelSpec spec = l.spec();
  std::string s = "# rank node local tp cp ep dp pp\n";
  for (int r = 0; r < spec.world(); ++r) {
    const auto c = spec.coords(r);
    s += fmt::format("{} {} {} {} {} {} {} {}\n", r, r / gpusPerNode, r % gpusPerNode, c[0], c[1], c[2], c[3], c[4]);
  }
  return s;
}

std::string placementSummary(const Layout& l, const HardwareSpec& hw) {
  const ParallelSpec spec = l.spec();
  std::string s = fmt::format("placement of {} (order {}) on {} nodes x {} GPUs:\n", spec.describe(), spec.orderString(),
                              hw.nodes, hw.gpusPerNode);
  const char* names[] = {"tp", "cp", "ep", "dp", "pp"};
  for (int d = 0; d < kParallelDims; ++d) {
    const GroupShape g = groupShape(spec, 1u << d, hw.gpusPerNode);
    const topology::CommLayout lay = shapeLayout(g, std::min(g.nodes, 2), hw);
    std::set<int> classes;
    for (int a = 0; a < lay.nranks(); ++a)
      for (int b = a + 1; b < lay.nranks(); ++b) classes.insert(linkSlowness(lay.link(a, b)));
    std::string cls;
    for (int c : classes)
      for (int k = 0; k < topology::kLinkClassCount; ++k)
        if (linkSlowness(topology::LinkClass(k)) == c)
          cls += std::string(cls.empty() ? "" : " + ") + topology::linkClassName(topology::LinkClass(k));
    s += fmt::format("  {:<3} {:>6} ranks x {:>6} groups: {}, {} node{} ({} GPU{} per node)\n", names[d], g.size,
                     spec.world() / g.size, g.size == 1 ? "self" : cls, g.nodes, g.nodes == 1 ? "" : "s",
                     g.locals.size(), g.locals.size() == 1 ? "" : "s");
  }
  return s;
}

std::string planReport(const PlanResult& r, const ModelSpec& m, const HardwareSpec& hw, int top) {
  std::string s = fmt::format("model {}: {:.1f}B parameters ({:.1f}B active per token), seq {}, global batch {} "
                              "sequences ({:.1f}M tokens)\n",
                              m.name, m.totalParams() / 1e9, m.activeParamsPerToken() / 1e9, m.seq, m.globalBatch,
                              double(m.globalBatch) * m.seq / 1e6);
  if (hw.sharedCores > 0)
    s += fmt::format("cluster: {}\n", hw.description);
  else
    s += fmt::format("cluster: {} = {} GPUs; GEMM efficiency {:.2f}, HBM {:.0f} GB/s x {:.2f}\n", hw.description,
                     hw.gpus(), hw.matmulEfficiency, hw.hbmBytesPerSec / 1e9, hw.hbmEfficiency);
  s += fmt::format("{} candidate layouts: {} fit, {} do not fit in memory; planned in {:.2f} s ({} cost-model "
                   "simulations)\n\n",
                   r.candidates, r.ranked.size(), r.rejected.size(), r.seconds, r.simulations);
  if (r.ranked.empty()) {
    s += "no layout fits";
    if (!r.rejected.empty()) s += fmt::format("; the smallest: {}: {}", r.rejected[0].layout.describe(), r.rejected[0].reject);
    return s + "\n";
  }
  s += fmt::format("{:>4}  {:<52} {:>8} {:>12} {:>7} {:>6} {:>7} {:>8}\n", "rank", "layout", "step s", "tokens/s",
                   "TFLOP/s", "MFU%", "bubble%", "mem GiB");
  for (size_t i = 0; i < r.ranked.size() && int(i) < top; ++i) {
    const Prediction& p = r.ranked[i];
    s += fmt::format("{:>4}  {:<52} {:>8.3f} {:>12.0f} {:>7.0f} {:>6.1f} {:>7.1f} {:>8.1f}\n", i + 1, p.layout.describe(),
                     p.step, p.tokensPerSec, p.tflopsPerGpu, 100 * p.mfu, 100 * p.pipe.bubble, p.memory.total() / kGiB);
  }
  if (!r.rejected.empty())
    s += fmt::format("rejected (memory), e.g. {}: {}\n", r.rejected[0].layout.describe(), r.rejected[0].reject);
  s += "\nchosen layout:\n" + predictionDetail(r.ranked[0], m, hw) + placementSummary(r.ranked[0].layout, hw);
  if (r.ranked.size() > 1) s += "\n" + explainWinner(r.ranked[0], r.ranked[1]);
  s += "\nstrata-train flags: " + trainerFlags(r.ranked[0], m) + "\n";
  s += fmt::format("rank order: {} (node-major: rank r on node r / {}, GPU r % {}; --rankfile writes every rank)\n",
                   r.ranked[0].layout.order, hw.gpusPerNode, hw.gpusPerNode);
  return s;
}

}  // namespace strata::planner
