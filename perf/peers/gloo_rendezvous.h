// gloo_rendezvous.h: connects a Gloo context over tcp for a job started by strata-run: rank and size
// from STRATA_RANK / STRATA_WORLD_SIZE, rendezvous through a file store in a directory all ranks
// agree on (by default one per strata-run job, derived from STRATA_UNIQUE_ID, removed once connected).
#pragma once

#include <gloo/context.h>

#include <memory>
#include <string>

namespace strata::perf {

struct GlooSetup {
  std::string storeDir;  ///< empty: /tmp/strata-gloo-<job>, created and removed here
  std::string host = "127.0.0.1";
  std::string iface;     ///< non-empty: listen on this interface's address instead of `host`
};

/// Connects every rank to every other (full mesh). Throws std::runtime_error with the reason.
std::shared_ptr<gloo::Context> connectGloo(const GlooSetup& setup);

}  // namespace strata::perf
