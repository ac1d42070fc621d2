// fuzz_hang_report: op-ring dumps (STRATA_DUMP_DIR files read by strata-run and strata-diagnose):
// text -> ProcessDump (parseDump), then the diagnosis over them. The input holds one dump per
// form-feed-separated part, as the dumps of several ranks. Each dump parses or is refused with a
// message naming the line; a parsed dump written back (formatDump) parses to the same text; the
// diagnosis of any set of parsed dumps finishes with a verdict.
#include "collectives/hang_report.h"
#include "fuzz_util.h"

using namespace strata::hang;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<ProcessDump> dumps;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t ff = all.find('\f', pos);
    if (ff == std::string::npos) ff = all.size();
    ProcessDump d;
    const strata::Status st = parseDump(all.substr(pos, ff - pos), &d);
    if (st.ok()) {
      const std::string once = formatDump(d);
      ProcessDump back;
      const strata::Status st2 = parseDump(once, &back);
      FUZZ_CHECK(st2.ok(), "a written dump does not parse: %s\n%s", st2.message().c_str(), once.c_str());
      const std::string twice = formatDump(back);
      FUZZ_CHECK(once == twice, "the round trip changes the dump:\n%s---\n%s", once.c_str(), twice.c_str());
      dumps.push_back(std::move(d));
    } else {
      FUZZ_CHECK(!st.message().empty(), "an error without a message");
    }
    pos = ff + 1;
  }
  // The diagnosis walks every rank of a communicator: dumps may claim up to 2^22, which costs
  // milliseconds under ASan and slowed the fuzzer sixfold once its corpus held such dumps.
  for (const ProcessDump& d : dumps)
    for (const CommDump& c : d.comms)
      if (c.nranks > 65536) return 0;
  const Diagnosis diag = diagnose(dumps);
  FUZZ_CHECK(!diag.text.empty(), "an empty diagnosis");
  return 0;
}
