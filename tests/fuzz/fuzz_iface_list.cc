// fuzz_iface_list: interface and device name lists and addresses named in the environment or a
// topology file: STRATA_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (interfaceMatches: comma-separated
// prefixes, '^' to exclude, '=' for exact names) and PCI bus ids (normalizePciBusId). Input: the
// spec, a newline, then interface names one per line (the last line is also tried as a PCI id).
// A leading '^' inverts the answer; a normalised PCI id normalises to itself.
#include "fuzz_util.h"
#include "topology/detect.h"
#include "transport/socket.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const std::string spec = in.line();
  std::string name;
  for (int i = 0; i < 64 && in.left(); ++i) {
    name = in.line();
    const bool hit = strata::net::interfaceMatches(spec, name);
    if (spec.empty() || spec[0] != '^')
      FUZZ_CHECK(strata::net::interfaceMatches("^" + spec, name) == !hit, "'^' does not invert '%s' for '%s'",
                 spec.c_str(), name.c_str());
  }
  for (const std::string& id : {spec, name}) {
    const std::string norm = strata::topology::normalizePciBusId(id);
    if (!norm.empty())
      FUZZ_CHECK(strata::topology::normalizePciBusId(norm) == norm, "'%s' -> '%s' is not stable", id.c_str(),
                 norm.c_str());
  }
  return 0;
}
