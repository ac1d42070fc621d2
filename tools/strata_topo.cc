// strata_topo.cc: strata-topo, what the machine (or a cluster described by a topology file)
// looks like to strata.
//
//   strata-topo                          this machine, detected (or $STRATA_TOPO_FILE when set)
//   strata-topo --file cluster.json      a topology file (docs/TOPOLOGY.md)
//   strata-topo --hwloc-xml node.xml     one node from an hwloc XML export (lstopo node.xml)
//   ... [--json [FILE]] [--dot FILE] [--png FILE]
//
// Prints nodes, NUMA domains, GPUs and NVLinks, NICs with rate, state and rail, and the link
// classes with their costs. --json writes the cluster as a topology file (to stdout without
// FILE, and then nothing else is printed), --dot a Graphviz picture, --png renders it with
// Graphviz's `dot`. Exit codes: 0 done, 1 failed (bad file, cannot write, no `dot`), 2 bad usage.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "tools/topo_job.h"
#include "topology/detect.h"
#include "topology/topo_draw.h"
#include "topology/topo_file.h"
#include "topology/topo_print.h"
#include "transport/config.h"

extern char** environ;

namespace {

using strata::Status;
using namespace strata::topology;

int fail(const std::string& msg) {
  std::fprintf(stderr, "strata-topo: %s\n", msg.c_str());
  return 1;
}

Status writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  if (!out) return strata::systemError("cannot write {}: {}", path, std::strerror(errno));
  return strata::OkStatus();
}

bool onPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (access(((dir.empty() ? "." : dir) + "/" + prog).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Renders DOT text to a PNG with Graphviz: dot -Tpng -o png dotFile.
Status renderPng(const std::string& dotText, const std::string& png) {
  char tmpl[] = "/tmp/strata-topo-XXXXXX.dot";
  const int fd = mkstemps(tmpl, 4);
  if (fd < 0) return strata::systemError("cannot create a temporary file: {}", std::strerror(errno));
  close(fd);
  Status st = writeFile(tmpl, dotText);
  if (st.ok()) {
    const char* argv[] = {"dot", "-Tpng", "-o", png.c_str(), tmpl, nullptr};
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, "dot", nullptr, nullptr, const_cast<char* const*>(argv), environ);
    int wst = 0;
    if (rc != 0) {
      st = strata::systemError("cannot run dot: {}", std::strerror(rc));
    } else if (waitpid(pid, &wst, 0) < 0 || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
      st = strata::systemError("dot -Tpng failed for {}", png);
    }
  }
  unlink(tmpl);
  return st;
}

// The cluster to show: a file, an hwloc XML export, $STRATA_TOPO_FILE, or this machine.
Status loadCluster(const std::string& file, const std::string& hwlocXml, Cluster* c) {
  const std::string& envFile = strata::config().topoFile;  // STRATA_TOPO_FILE
  if (!file.empty()) return loadTopologyFile(file, c);
  if (hwlocXml.empty() && !envFile.empty()) return loadTopologyFile(envFile, c);
  Node node;
  if (!hwlocXml.empty()) {
    STRATA_RETURN_IF_ERROR(loadHwlocXml(hwlocXml, &node));
    c->source = "hwloc-xml " + hwlocXml;
  } else {
    STRATA_RETURN_IF_ERROR(detectLocalNode(&node));
    c->source = "detected on " + node.hostname;
  }
  c->nodes.push_back(std::move(node));
  c->applyDefaultCosts();
  return strata::OkStatus();
}

int topoMain(int argc, char** argv) {
  CLI::App app{"Shows the topology strata sees: this machine (detected with hwloc, NVML and sysfs), or the\n"
               "cluster of a topology file (docs/TOPOLOGY.md).",
               "strata-topo"};
  std::string file, hwlocXml, jsonPath, dotPath, pngPath;
  CLI::Option* fileOpt =
      app.add_option("--file", file, "read a topology file instead of detecting (default: $STRATA_TOPO_FILE)");
  fileOpt->type_name("FILE");
  CLI::Option* xmlOpt = app.add_option("--hwloc-xml", hwlocXml, "describe the node of an hwloc XML export");
  xmlOpt->type_name("FILE")->excludes(fileOpt);
  CLI::Option* jsonOpt =
      app.add_option("--json", jsonPath, "write the topology as a topology file to FILE (stdout without FILE)");
  jsonOpt->type_name("[FILE]")->expected(0, 1);
  app.add_option("--dot", dotPath, "write a Graphviz picture (DOT) to FILE")->type_name("FILE");
  app.add_option("--png", pngPath, "render the picture to a PNG with Graphviz's dot")->type_name("FILE");
  bool job = false;
  app.add_flag("--job", job,
               "run as every rank of a job (under strata-run, mpirun, srun or torchrun variables); rank 0 "
               "prints which rank sits on which node, local rank and rail")
      ->excludes(fileOpt)
      ->excludes(xmlOpt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (job) return strata::tools::runJobReport();
  if (!pngPath.empty() && !onPath("dot"))
    return fail("--png needs Graphviz's `dot`, which is not installed here (Debian: apt-get install graphviz); "
                "--dot FILE writes the picture's DOT text to render elsewhere");
  Cluster cluster;
  if (Status st = loadCluster(file, hwlocXml, &cluster); !st.ok()) return fail(st.message());

  const bool jsonToStdout = jsonOpt->count() > 0 && jsonPath.empty();
  if (jsonToStdout) {
    std::fputs(clusterToJson(cluster).c_str(), stdout);
  } else {
    std::fputs(describeCluster(cluster).c_str(), stdout);
  }
  auto note = [&](const std::string& what) {
    if (!jsonToStdout) std::printf("wrote %s\n", what.c_str());
  };
  if (!jsonPath.empty()) {
    if (Status st = writeFile(jsonPath, clusterToJson(cluster)); !st.ok()) return fail(st.message());
    note(jsonPath);
  }
  const std::string dot = dotPath.empty() && pngPath.empty() ? std::string() : clusterToDot(cluster);
  if (!dotPath.empty()) {
    if (Status st = writeFile(dotPath, dot); !st.ok()) return fail(st.message());
    note(dotPath);
  }
  if (!pngPath.empty()) {
    if (Status st = renderPng(dot, pngPath); !st.ok()) return fail(st.message());
    note(pngPath);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return topoMain(argc, argv); }
