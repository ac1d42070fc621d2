// strata_plan.cc: strata-plan, the parallel-layout planner's command line (docs/PLANNER.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>

#include "planner/host.h"
#include "planner/job_sim.h"
#include "planner/plan.h"
#include "planner/validation.h"

using namespace strata::planner;

int main(int argc, char** argv) {
  CLI::App app{"strata-plan: choose the parallel layout of a training job for a cluster (docs/PLANNER.md)"};
  std::string clusterFile, modelFile, flagsOut, rankfile, rankingOut, onlyLayout, validateFile, root = ".";
  int top = 15, nodes = 0, hostRanks = 0, hostCores = 0;
  double eff = 0, hbmEff = 0, hostStep = 0;
  bool noDpOverlap = false, quick = false, simulate = false;
  SearchSpace space;
  app.add_option("--cluster", clusterFile, "cluster (topology) file, e.g. topology/files/dgx_h100_2048n.json");
  app.add_option("--model", modelFile, "model file, e.g. planner/models/llama3_70b.json");
  app.add_option("--host-ranks", hostRanks,
                 "plan the reference trainer's CPU ranks on this machine instead of a cluster file: N ranks sharing "
                 "its cores, the trainer's GEMM rate and memory bandwidth measured here");
  app.add_option("--host-step-seconds", hostStep,
                 "with --host-ranks: the model's measured step time on ONE rank (strata-train alone); the measured "
                 "kernel rates are scaled so that the one-rank prediction equals it (the parallel layouts stay predicted)");
  app.add_option("--cores", hostCores, "with --host-ranks: cores the ranks share (default: the CPUs this process may use)");
  HostNetwork hostNet;
  double railMbit = 0;
  app.add_option("--host-nodes", hostNet.nodes,
                 "with --host-ranks: the ranks run on a virtual cluster of this many nodes (strata-run --nodes), "
                 "node-major");
  app.add_option("--host-rails", hostNet.rails, "with --host-nodes: rails per node (strata-run --rails; default 1)");
  app.add_option("--host-rail-mbit", railMbit,
                 "with --host-nodes: each rail's shaped rate in Mbit/s per direction (strata-run --rail-rate; "
                 "default: unshaped)");
  app.add_option("--host-latency-us", hostNet.latencyUs,
                 "with --host-nodes: one message's latency between nodes (default 50 us)");
  app.add_option("--nodes", nodes, "use this many nodes of the cluster file's first node type");
  app.add_option("--validate", validateFile, "predict the published runs of a validation file and print the table");
  app.add_option("--root", root, "with --validate: directory the cluster paths are relative to (default .)");
  app.add_option("--top", top, "rows of the ranking to print");
  app.add_option("--efficiency", eff, "GEMM efficiency (share of peak FLOP/s; default: the GPU table's)");
  app.add_option("--hbm-efficiency", hbmEff, "share of peak memory bandwidth element-wise kernels reach (default 0.8)");
  app.add_flag("--no-dp-overlap", noDpOverlap, "gradient reduction after the backward, not overlapped with it");
  app.add_option("--zero", space.zeroStages, "ZeRO stages to consider (default 0 1 3)");
  app.add_option("--mbs", space.mbsChoices, "microbatch sizes to consider (default 1 2 4 8)");
  app.add_option("--max-tp", space.maxTp, "largest tensor-parallel size (default: GPUs per node)");
  app.add_flag("--quick", quick, "only 1f1b and interleaved schedules");
  app.add_flag("--simulate", simulate,
               "check the chosen layout's prediction: one step as a discrete-event run over every rank, each "
               "collective through its schedule at the group's full size (no data moved)");
  app.add_option("--flags-out", flagsOut, "write the chosen layout's strata-train flags to this file");
  app.add_option("--ranking-out", rankingOut,
                 "write every ranked layout as 'rank<TAB>predicted step s<TAB>layout<TAB>strata-train flags' to this file");
  app.add_option("--rankfile", rankfile, "write 'rank node local tp cp ep dp pp' for every rank to this file");
  app.add_option("--layout", onlyLayout, "only predict layouts whose description contains this text (e.g. 'tp8 cp1 ep1 dp64 pp16')");
  CLI11_PARSE(app, argc, argv);
  space.allSchedules = !quick;
  if (!validateFile.empty()) {
    std::vector<ValidationRow> rows;
    strata::Status st = loadValidationFile(validateFile, root, &rows);
    if (!st.ok()) {
      fmt::print(stderr, "strata-plan: {}\n", st.message());
      return 1;
    }
    runValidation(&rows);
    fmt::print("{}", validationTable(rows));
    return 0;
  }
  if ((clusterFile.empty() == (hostRanks <= 0)) || modelFile.empty()) {
    fmt::print(stderr, "strata-plan: --model and one of --cluster FILE or --host-ranks N are required (or --validate FILE)\n");
    return 2;
  }
  if (hostRanks <= 0 && (hostNet.nodes != 1 || hostNet.rails != 1 || railMbit > 0)) {
    fmt::print(stderr, "strata-plan: --host-nodes, --host-rails and --host-rail-mbit need --host-ranks\n");
    return 2;
  }
  if (hostRanks > 0 && nodes > 0) {
    fmt::print(stderr, "strata-plan: --nodes applies to --cluster; with --host-ranks use --host-nodes\n");
    return 2;
  }
  if (hostRanks > 0 && (hostNet.nodes < 1 || hostRanks % hostNet.nodes != 0)) {
    fmt::print(stderr, "strata-plan: --host-ranks {} is not a multiple of --host-nodes {}\n", hostRanks, hostNet.nodes);
    return 2;
  }
  if (hostNet.rails < 1 || railMbit < 0 || hostNet.latencyUs < 0) {
    fmt::print(stderr, "strata-plan: --host-rails must be at least 1, --host-rail-mbit and --host-latency-us not negative\n");
    return 2;
  }
  hostNet.railBitsPerSec = railMbit * 1e6;
  if (hostRanks > 0 && simulate) {
    fmt::print(stderr, "strata-plan: --simulate models a device per rank; it does not apply to --host-ranks\n");
    return 2;
  }

  HardwareSpec hw;
  ModelSpec model;
  strata::Status st = loadModelFile(modelFile, &model);
  if (st.ok() && hostRanks <= 0) st = loadClusterFile(clusterFile, &hw);
  if (!st.ok()) {
    fmt::print(stderr, "strata-plan: {}\n", st.message());
    return 1;
  }
  if (hostRanks > 0) {
    const HostCalibration cal = calibrateHost(model);
    hw = hostHardware(hostRanks, hostCores, cal, hostNet);
    if (hostStep > 0) {
      const double scale = oneRankStep(model, cal) / hostStep;
      hw.peakFlops *= scale, hw.attentionFlops *= scale, hw.hbmBytesPerSec *= scale, hw.optimizerBytesPerSec *= scale;
      hw.description += fmt::format("; rates x {:.3f} to match the measured one-rank step of {:.3f} s", scale, hostStep);
    }
  }
  if (nodes > 0) hw.setNodes(nodes);
  if (eff > 0) hw.matmulEfficiency = eff;
  if (hbmEff > 0) hw.hbmEfficiency = hbmEff;
  StepOptions opt;
  opt.dpOverlap = !noDpOverlap;
  if (hostRanks > 0) {  // the reference trainer's layouts: context parallelism at any length, its blocking ring
    space.maxCp = hostRanks, space.wholeExperts = true;
    opt.cpOverlap = false;
  }
  PlanResult r;
  if (onlyLayout.empty()) {
    r = makePlan(model, hw, space, opt);
  } else {
    StepModel sm(model, hw, opt);
    for (const Layout& l : enumerateLayouts(model, hw.gpus(), hw.gpusPerNode, space)) {
      if (l.describe().find(onlyLayout) == std::string::npos) continue;
      ++r.candidates;
      Prediction p = sm.predict(l);
      (p.fits ? r.ranked : r.rejected).push_back(std::move(p));
    }
    std::sort(r.ranked.begin(), r.ranked.end(), [](const Prediction& a, const Prediction& b) { return a.step < b.step; });
  }
  fmt::print("{}", planReport(r, model, hw, top));
  if (r.ranked.empty()) return 1;
  if (simulate) {
    StepModel sm(model, hw, opt);
    const Prediction p = sm.predict(r.ranked[0].layout);
    fmt::print("\n{}", describeJobSim(simulateJob(model, p, sm.coster(), opt.dpOverlap), p));
  }
  if (!flagsOut.empty()) std::ofstream(flagsOut) << trainerFlags(r.ranked[0], model) << "\n";
  if (!rankingOut.empty()) {
    std::ofstream out(rankingOut);
    for (size_t i = 0; i < r.ranked.size(); ++i)
      out << fmt::format("{}\t{:.6f}\t{}\t{}\n", i + 1, r.ranked[i].step, r.ranked[i].layout.describe(),
                         trainerFlags(r.ranked[i], model));
  }
  if (!rankfile.empty()) std::ofstream(rankfile) << rankTable(r.ranked[0].layout, hw.gpusPerNode);
  return 0;
}
