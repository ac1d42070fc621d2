// fuzz_bootstrap_wire: the bootstrap's messages as they arrive from the network
// (transport/bootstrap_wire.h): join messages at the root (a round of them: wire::joinRefusal),
// the root's reply at a joining rank (wire::joinReplyError) and the hello at the start of every
// connection to a rank's listener (wire::helloProblem). The input's first byte picks the message,
// the rest is its bytes (several join messages back to back). The root's secret check is not
// fuzzed (a constant-time compare a fuzzer cannot get past); the secret here is all zeros.
#include <set>

#include "fuzz_util.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_wire.h"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint8_t which = in.take<uint8_t>();
  switch (which % 3) {
    case 0: {  // a round of joins at the root: expectNranks from the input (0: any)
      const int expect = in.take<uint8_t>() % 8;
      int round = -1;
      std::set<int> taken;
      while (in.left() >= sizeof(wire::JoinMsg)) {
        const wire::JoinMsg m = in.take<wire::JoinMsg>();
        const std::string bad = wire::joinRefusal(m, expect, round);
        if (!bad.empty()) continue;
        FUZZ_CHECK(m.nranks >= 1 && m.nranks <= (1 << 22) && m.rank >= 0 && m.rank < m.nranks,
                   "took rank %d of %d", m.rank, m.nranks);
        FUZZ_CHECK(expect == 0 || m.nranks == expect, "took %d ranks in a job of %d", m.nranks, expect);
        FUZZ_CHECK(round < 0 || m.nranks == round, "took %d ranks in a round of %d", m.nranks, round);
        if (round < 0) round = m.nranks;
        taken.insert(m.rank);
      }
      break;
    }
    case 1: {  // the root's reply to a rank, failure text behind it
      const wire::JoinReply r = in.take<wire::JoinReply>();
      if (r.status == strataSuccess) break;  // success: partners follow, of a count the rank computes
      const std::string msg = in.bytes(r.msgLen < 4096 ? r.msgLen : 4096);
      const Status st = wire::joinReplyError(r, msg);
      FUZZ_CHECK(!st.ok(), "a failed reply made a success");
      FUZZ_CHECK(st.code() > strataSuccess && st.code() < strataNumResults, "status %d", static_cast<int>(st.code()));
      break;
    }
    default: {  // a hello at a rank's listener of a communicator of `nranks`
      const int nranks = 1 + in.take<uint8_t>();
      const wire::Hello h = in.take<wire::Hello>();
      const uint8_t secret[16] = {};
      const char* why = wire::helloProblem(h, secret, /*commTag=*/0, nranks);
      if (why) break;
      FUZZ_CHECK(h.rank >= 0 && h.rank < nranks && h.index >= 0 && h.index <= (1 << 20) && h.kind >= Bootstrap::kRing &&
                     h.kind <= Bootstrap::kProbe,
                 "took a hello of rank %d index %d kind %u", h.rank, h.index, h.kind);
      break;
    }
  }
  return 0;
}
