#!/usr/bin/env bash
# parity_matrix.sh: every parallel layout of strata-train against the single-rank run, as a table.
#
#   examples/trainer/parity_matrix.sh              # ranks as threads, then as processes (strata-run)
#   examples/trainer/parity_matrix.sh threads      # one of the two
#   examples/trainer/parity_matrix.sh processes
#
# Each case trains a small GPT (4 layers, hidden 32, 4 heads, seq 16, byte vocab 256, GPL-3 text)
# for 10 steps and compares its loss curve with one rank on the same tokens: within 1e-5 relative
# per step, and bitwise for the data-parallel / ZeRO cases. Builds what it needs into ./build.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-both}
if [ ! -x build/examples/trainer/strata-train ] || [ ! -x build/tools/strata-run ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build --target strata-train strata-run -j"$(nproc)"
fi
rc=0
if [ "$mode" = both ] || [ "$mode" = threads ]; then
  build/examples/trainer/strata-train --parity || rc=1
fi
if [ "$mode" = both ] || [ "$mode" = processes ]; then
  [ "$mode" = both ] && echo
  build/examples/trainer/strata-train --parity --launcher build/tools/strata-run || rc=1
fi
exit $rc
