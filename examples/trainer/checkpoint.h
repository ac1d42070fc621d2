// checkpoint.h: layout-independent checkpoints.
//
// A checkpoint folder holds meta.json (model settings, step) and one file per full tensor,
// <name>.bin = full fp32 parameter, then AdamW's m, then v (rows*cols floats each). Saving
// gathers ZeRO shards inside each rank, then the lowest rank holding each distinct piece sends it
// to rank 0, which assembles the full tensors. Loading reads the files on every rank and keeps
// this layout's pieces, so a run saved with one layout resumes under any other.
#pragma once

#include <string>

#include "context.h"

namespace trainer {

/// Collective over the world. Writes after `step` steps.
void saveCheckpoint(Ctx& c, const std::string& dir, int step);
/// Loads parameters and optimizer state; returns the step to resume from. Throws on mismatch.
int loadCheckpoint(Ctx& c, const std::string& dir);
/// True if `dir` holds a whole checkpoint (saves write beside it and swap it in).
bool checkpointExists(const std::string& dir);

}  // namespace trainer
