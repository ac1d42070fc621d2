// process_alive.h: whether a process of this machine still runs (what peers on one machine use to
// tell a dead rank from a slow one without waiting for a timeout).
#pragma once

namespace strata {

/// Alive and not a zombie: a killed child stays a zombie until its parent reaps it.
bool processAlive(int pid);

}  // namespace strata
