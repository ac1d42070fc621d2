// topo_placement.h: a topology file's text with its "placement" line replaced, for tests that
// place ranks on virtual nodes other than the shipped files do (topology/files/*.json keep the
// placement on one line of its own).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace strata::testing {

/// The text of topology file `path` with its placement replaced by `placement` (JSON text, e.g.
/// "[0, 1, 2]"); empty when the file cannot be read or has no placement line.
inline std::string withPlacement(const std::string& path, const std::string& placement) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  const size_t at = text.find("\"placement\"");
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at);
  return text.substr(0, at) + "\"placement\": " + placement + (end == std::string::npos ? "" : text.substr(end));
}

}  // namespace strata::testing
