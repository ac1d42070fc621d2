#!/usr/bin/env bash
# parity_matrix.sh: every parallel layout of strata-train against the single-rank run, as a table.
#
#   examples/trainer/parity_matrix.sh              # ranks as threads, then as processes (strata-run),
#                                                  # then the 8-rank layouts on a virtual cluster
#   examples/trainer/parity_matrix.sh threads      # one of the three
#   examples/trainer/parity_matrix.sh processes
#   examples/trainer/parity_matrix.sh vnodes
#   STRATA_BUILD=build-x examples/trainer/parity_matrix.sh   # binaries from another build folder
#
# Each case trains a small GPT (4 layers, hidden 32, 4 heads, seq 16, byte vocab 256, GPL-3 text)
# for 10 steps and compares its loss curve with one rank on the same tokens: within 1e-5 relative
# per step, and bitwise for the data-parallel / ZeRO cases. `vnodes` runs the 8-rank cases again,
# as threads and as processes, on the unprivileged virtual cluster of topology/files/virtual_2x4.json
# (ranks 0-3 and 4-7 on two virtual nodes, tcp between them); the order case there puts tp across
# the nodes and is warned about. Builds what it needs into $STRATA_BUILD (default ./build).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-all}
build=${STRATA_BUILD:-build}
if [ ! -x "$build/examples/trainer/strata-train" ] || [ ! -x "$build/tools/strata-run" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target strata-train strata-run -j"$(nproc)"
fi
train=$build/examples/trainer/strata-train run=$build/tools/strata-run
vnode_cases=(dp2_tp2_pp2 tp2_cp2_ep2_sp dp2_tp2_pp2_zero3_sp dp2_tp2_ep2_zero1 pp2_cp2_ep2_zero2 tp2_cp2_ep2_sp_drop
             dp2_tp2_pp2_order dp2_tp2_pp2_zb)
rc=0
if [ "$mode" = all ] || [ "$mode" = both ] || [ "$mode" = threads ]; then
  "$train" --parity || rc=1
fi
if [ "$mode" = all ] || [ "$mode" = both ] || [ "$mode" = processes ]; then
  [ "$mode" = threads ] || [ "$mode" = processes ] || echo
  "$train" --parity --launcher "$run" || rc=1
fi
if [ "$mode" = all ] || [ "$mode" = vnodes ]; then
  [ "$mode" = vnodes ] || echo
  export STRATA_TOPO_FILE=$PWD/topology/files/virtual_2x4.json
  "$train" --parity-case "${vnode_cases[@]}" || rc=1
  echo
  "$train" --parity-case "${vnode_cases[@]}" --launcher "$run" || rc=1
fi
exit $rc
