// strata_diagnose.cc: strata-diagnose, the hang report for jobs that strata-run did not launch.
//
//   strata-diagnose DIR|FILE...
//
// Reads the op-ring dumps that ranks wrote to STRATA_DUMP_DIR (when an operation failed or timed
// out, or on SIGUSR1: `kill -USR1 <pids>` makes ranks that are still running write theirs) and
// prints per communicator which rank is behind, which ranks called something different, and what
// the waiting ranks wait on (collectives/hang_report.h). Exit code: 0 nothing pending, 1 a problem
// found, 2 bad usage or no readable dump.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/hang_report.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: strata-diagnose DIR|FILE...\n"
                 "Reads the op-ring dumps (strata-<host>-<pid>.dump) that ranks write to STRATA_DUMP_DIR on\n"
                 "failure, timeout or SIGUSR1, and says which rank is behind, which ranks call something\n"
                 "different and what the waiting ranks wait on.\n");
    return 2;
  }
  std::vector<strata::hang::ProcessDump> dumps;
  std::string notes;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "strata-diagnose: cannot read %s\n", argv[i]);
      return 2;
    }
    if (S_ISDIR(st.st_mode)) {
      strata::Status s = strata::hang::readDumpDir(argv[i], &dumps, &notes);
      if (!s.ok()) {
        std::fprintf(stderr, "strata-diagnose: %s\n", s.message().c_str());
        return 2;
      }
      continue;
    }
    std::ifstream f(argv[i]);
    std::stringstream text;
    text << f.rdbuf();
    strata::hang::ProcessDump d;
    strata::Status s = strata::hang::parseDump(text.str(), &d);
    if (!s.ok()) {
      notes += std::string("skipped ") + argv[i] + ": " + s.message() + "\n";
      continue;
    }
    d.source = argv[i];
    dumps.push_back(std::move(d));
  }
  if (!notes.empty()) std::fputs(notes.c_str(), stderr);
  if (dumps.empty()) {
    std::fprintf(stderr, "strata-diagnose: no readable dump\n");
    return 2;
  }
  strata::hang::Diagnosis diag = strata::hang::diagnose(dumps);
  std::printf("strata-diagnose: %zu dump%s\n%s", dumps.size(), dumps.size() == 1 ? "" : "s", diag.text.c_str());
  return diag.problem ? 1 : 0;
}
