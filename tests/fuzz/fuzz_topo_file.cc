// fuzz_topo_file: topology files (STRATA_TOPO_FILE, strata-topo): JSON text -> Cluster
// (parseTopologyJson). A file is accepted or refused with a message, never a crash, an exception
// or an allocation out of proportion; an accepted cluster written back (clusterToJson) reads back
// to the same text. "hwloc_xml" names a file: only relative names are let through, resolved in a
// directory that does not exist (the fuzzer must not open /dev/zero; hwloc's XML parser is hwloc's).
// Files of more than 65536 nodes by "count" are skipped (seconds each under ASan).
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "topology/topo_file.h"

namespace {

bool safeXmlPaths(const nlohmann::json& v) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "hwloc_xml" && it->is_string()) {
        const std::string p = it->get<std::string>();
        if (p.empty() || p[0] == '/' || p.find("..") != std::string::npos) return false;
      }
      if (!safeXmlPaths(*it)) return false;
    }
  } else if (v.is_array()) {
    for (const auto& e : v)
      if (!safeXmlPaths(e)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    const nlohmann::json pre = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!pre.is_discarded() && !safeXmlPaths(pre)) return 0;
    // Up to 2^20 nodes are allowed, and take seconds under ASan: fuzz the same paths with fewer.
    if (pre.is_object() && pre.contains("nodes") && pre["nodes"].is_object() && pre["nodes"].contains("count") &&
        pre["nodes"]["count"].is_number() && pre["nodes"]["count"].get<double>() > 65536)
      return 0;
  }
  strata::topology::Cluster c;
  const strata::Status st =
      strata::topology::parseTopologyJson(text, "fuzz.json", "/nonexistent-strata-fuzz-dir", &c);
  if (!st.ok()) {
    FUZZ_CHECK(!st.message().empty(), "an error without a message");
    return 0;
  }
  if (c.nodes.size() > 64 || c.rankNode.size() > 4096) return 0;  // the round trip writes every node
  const std::string once = strata::topology::clusterToJson(c);
  strata::topology::Cluster back;
  const strata::Status st2 = strata::topology::parseTopologyJson(once, "fuzz.json", "/nonexistent-strata-fuzz-dir", &back);
  FUZZ_CHECK(st2.ok(), "the written cluster does not read back: %s\n%s", st2.message().c_str(), once.c_str());
  const std::string twice = strata::topology::clusterToJson(back);
  FUZZ_CHECK(once == twice, "the round trip changes the cluster:\n%s\n---\n%s", once.c_str(), twice.c_str());
  return 0;
}
