// fuzz_call_tag: call tags as they arrive in frame headers (transport/call_tag.h): 16 bytes a peer
// wrote, decoded and named in the mismatch error (describeCall, callMismatch). Every tag unpacks
// to fields that pack back to it, and naming any tag is safe.
#include "fuzz_util.h"
#include "transport/call_tag.h"

using strata::CallTag;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const CallTag sent{in.take<uint64_t>(), in.take<uint64_t>()};
  const CallTag expected{in.take<uint64_t>(), in.take<uint64_t>()};
  const int sender = in.take<int32_t>(), receiver = in.take<int32_t>();
  for (const CallTag& t : {sent, expected}) {
    const strata::CallFields f = strata::decodeCallTag(t);
    const CallTag back = strata::makeCallTag(f.seq, f.code, f.count, f.dtype, f.op, f.root);
    FUZZ_CHECK(back == t, "tag %016llx/%llu does not pack back", (unsigned long long)t.word,
               (unsigned long long)t.count);
    const std::string d = strata::describeCall(t);
    FUZZ_CHECK(!d.empty(), "empty description");
    (void)strata::callCodeName(f.code);
    (void)strata::callOpName(f.op);
  }
  const strata::Status st = strata::callMismatch(sender, sent, receiver, expected);
  FUZZ_CHECK(strata::isCallMismatch(st), "callMismatch is not recognised: %s", st.message().c_str());
  return 0;
}
