#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of tests/fuzz with clang in build-fuzz/ (only the sources
# they link, with ASan + UBSan) and runs each for SECONDS (default 20) on a copy of its seed corpus
# (tests/fuzz/corpus/<name>, dictionary tests/fuzz/dict/<name>.dict when there is one). Fails when
# any target finds a crash, leak, UB, timeout or broken check; prints the executions per target.
#   scripts/fuzz.sh [SECONDS] [TARGET...]        (targets: the names of tests/fuzz/fuzz_<name>.cc)
# Needs clang with libFuzzer (Debian: apt-get install -y clang); installs nothing itself.
# STRATA_FUZZ_JOBS: parallel compiles and targets run at once (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-20}
if [[ $# -gt 0 ]]; then shift; fi
jobs=${STRATA_FUZZ_JOBS:-2}
build=build-fuzz
if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found (Debian: apt-get install -y clang)" >&2
  exit 2
fi

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in tests/fuzz/fuzz_*.cc; do
    n=$(basename "$f" .cc)
    targets+=("${n#fuzz_}")
  done
fi

start=$(date +%s)
mkdir -p "$build"
cmake -S tests/fuzz -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSTRATA_FUZZ=ON \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$build" -j"$jobs" --target "${build_targets[@]}" >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log"; exit 1; }
built=$(date +%s)
echo "fuzz.sh: built ${#targets[@]} targets in $((built - start)) s; running each for $secs s, $jobs at a time"

# One target: a fresh copy of its corpus, artifacts (crash-*, leak-*, timeout-*) kept for replay.
run_one() {
  local t=$1 work=$build/fuzz-run/$1
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
  local args=(-max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -max_len=8192
              -artifact_prefix="$work/artifacts/")
  if [[ -f tests/fuzz/dict/$t.dict ]]; then args+=(-dict="tests/fuzz/dict/$t.dict"); fi
  if "$build/fuzz_$t" "${args[@]}" "$work/corpus" >"$work/log" 2>&1; then
    echo ok >"$work/result"
  else
    echo "failed (exit $?)" >"$work/result"
  fi
}

running=0
for t in "${targets[@]}"; do
  if [[ ! -d tests/fuzz/corpus/$t ]]; then
    echo "fuzz.sh: no target '$t' (tests/fuzz/fuzz_$t.cc, tests/fuzz/corpus/$t/)" >&2
    exit 2
  fi
  run_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-16s %12s %10s %9s %8s  %s\n' target executions exec/s new_units rss_mb result
for t in "${targets[@]}"; do
  work=$build/fuzz-run/$t
  field() { sed -n "s/^stat::$1: *//p" "$work/log" | tail -1; }
  result=$(cat "$work/result" 2>/dev/null || echo "no result")
  printf '%-16s %12s %10s %9s %8s  %s\n' "$t" "$(field number_of_executed_units)" "$(field average_exec_per_sec)" \
    "$(field new_units_added)" "$(field peak_rss_mb)" "$result"
  if [[ $result != ok ]]; then
    failed=1
    echo "---- $t: $work/log (last 40 lines); replay: $build/fuzz_$t $work/artifacts/<file>" >&2
    tail -40 "$work/log" >&2
    ls -l "$work/artifacts" >&2
  fi
done
echo "fuzz.sh: $(( $(date +%s) - start )) s in all (build $((built - start)) s)"
exit $failed
