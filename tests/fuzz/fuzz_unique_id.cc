// fuzz_unique_id: the STRATA_UNIQUE_ID string (uniqueIdFromHex, read by strataCommInitFromEnv and
// ncclGetUniqueId under strata-run) and the id it decodes to. An accepted string is exactly the
// id's 256 hex digits with strata's magic, and writing the id back gives the same digits.
#include <cctype>

#include "fuzz_util.h"
#include "transport/bootstrap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string hex(reinterpret_cast<const char*>(data), size);
  strataUniqueId id{};
  if (!strata::uniqueIdFromHex(hex, &id)) return 0;
  FUZZ_CHECK(hex.size() == 2 * STRATA_UNIQUE_ID_BYTES, "accepted %zu characters", hex.size());
  std::string lower = hex;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  FUZZ_CHECK(strata::uniqueIdToHex(id) == lower, "the id does not write back as its string");
  const strata::UniqueIdData d = strata::decodeUniqueId(id);
  const strata::UniqueIdData e = strata::decodeUniqueId(strata::encodeUniqueId(d));
  FUZZ_CHECK(e.magic == d.magic && e.rootAddr == d.rootAddr && e.rootPort == d.rootPort && e.commTag == d.commTag &&
                 std::memcmp(e.secret, d.secret, sizeof(d.secret)) == 0,
             "decode(encode(decode(id))) differs");
  return 0;
}
