#!/usr/bin/env bash
# sanitize.sh: sanitizer builds and their test runs (docs/RELIABILITY.md, "Sanitizers").
#   scripts/sanitize.sh asan   AddressSanitizer + UBSan in build-asan: labels unit, threads, process, fault
#   scripts/sanitize.sh tsan   ThreadSanitizer in build-tsan: label threads
#   scripts/sanitize.sh all    both (the default)
# Builds only the suites those labels need, at -O1 -g1 (ccache used when installed). Extra arguments
# go to ctest (e.g. -R Name). Any sanitizer report fails its test.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
shift || true
case "$mode" in asan|tsan|all) ;; *) echo "usage: $0 asan|tsan|all [ctest args]" >&2; exit 2 ;; esac
jobs=2  # CI's cores; sanitized ranks are heavy, more parallel tests only make timeouts flaky

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# build DIR SANITIZERS LABEL...: configures and builds the suites of the labels.
build() {
  local dir="$1" sanitizers="$2"
  shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DSTRATA_SANITIZE="$sanitizers" -DSTRATA_ENABLE_CUDA=OFF \
    -DSTRATA_BUILD_TORCH=OFF -DSTRATA_BUILD_PERF=OFF "${launcher[@]}" >/dev/null
  local targets=()
  for label in "$@"; do targets+=("strata_tests_$label"); done
  cmake --build "$dir" -j"$jobs" --target "${targets[@]}"
}

# Ranks forked or launched by strata-run inherit these.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

run_asan() {
  build build-asan address,undefined unit threads process fault
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0" \
  LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 600 \
      -L '^(unit|threads|process|fault)$' "$@"
}

run_tsan() {
  build build-tsan thread threads
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/sanitizers/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 900 -L '^threads$' "$@"
}

case "$mode" in
  asan) run_asan "$@" ;;
  tsan) run_tsan "$@" ;;
  all) run_asan "$@"; run_tsan "$@" ;;
esac
