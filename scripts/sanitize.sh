#!/usr/bin/env bash
# sanitize.sh: the sanitizer builds and their test runs (docs/RELIABILITY.md, "Sanitizers").
#   scripts/sanitize.sh asan   AddressSanitizer + UBSan (build-asan): labels unit, threads, process, fault
#   scripts/sanitize.sh tsan   ThreadSanitizer (build-tsan): label threads
#   scripts/sanitize.sh all    both (the default)
# Builds only what those labels' suites need (-O1 -g1; ccache when installed) and runs them with
# ctest; further arguments go to ctest (e.g. -R Name). Any sanitizer report fails its test.
# Needs scripts/install_deps.sh's packages. About 25 minutes on 2 cores (docs/RELIABILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
if [ $# -gt 0 ]; then shift; fi
case "$mode" in asan|tsan|all) ;; *) echo "usage: $0 asan|tsan|all [ctest args]" >&2; exit 2 ;; esac
jobs=2  # CI's cores: more parallel tests of busy-polling sanitized ranks only make them slower
supp="$PWD/scripts/sanitizers"

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# build DIR SANITIZERS LABEL...: configures DIR and builds the suites of the labels (strata_tests_<label>).
build() {
  local dir="$1" sanitizers="$2" targets=()
  shift 2
  for label in "$@"; do targets+=("strata_tests_$label"); done
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DSTRATA_SANITIZE="$sanitizers" -DSTRATA_ENABLE_CUDA=OFF -DSTRATA_BUILD_TORCH=OFF -DSTRATA_BUILD_PERF=OFF \
    "${launcher[@]}" >/dev/null || return
  cmake --build "$dir" -j"$jobs" --target "${targets[@]}" || return
}

# Every process of a test inherits these: ranks forked by it and ranks strata-run launches.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

run_asan() {
  build build-asan address,undefined unit threads process fault || return
  # Left out: the ~1M-element sweeps of the virtual-cluster suites (30-100 s each under ASan, ~15x
  # their normal time). Their quick variants, 2x2_hier, 2x2_hier_ucx, the hier thread case and
  # the netns auto/hier_ucx cases run the same code paths here; all run unsanitized in scripts/test.sh.
  # (CTest's names of parameterized cases end in "  # GetParam() = ...": hence "( |$)".)
  local slow='^Layouts/TopologyFileCluster\..*/(2x2_(auto|ring)|(2x3|4x2|3x2_uneven|2x3_interleaved)_(hier|auto|ring))( |$)'
  slow+='|^Algo/ThreadRanksOnVirtualNodes\..*/(auto|auto_ucx)( |$)|^Algo/NetnsCollectives\..*/(hier|auto_shaped)( |$)'
  # Also left out: a test that forks processes of rank threads while the parent runs the bootstrap
  # root's thread; under ASan its children often hang in init with no output (never unsanitized:
  # 10 of 10 pass). Suspected: ASan's allocator lock held across fork(). Open (docs/RELIABILITY.md).
  slow+='|^ProcessesOfThreadsOnVirtualNodes\.EveryKindOfPeerIsRightAndExact$'
  # hwloc's PCI plugin (libpciaccess) leaks ~1 KB per topology load, from a library it has unloaded
  # by exit, so LSan cannot name (or suppress) it: the ranks take the PCI devices from hwloc's
  # Linux sysfs discovery instead (the same devices and locality).
  HWLOC_COMPONENTS=-pci \
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1" \
  LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -L '^(unit|threads|process|fault)$' -E "$slow" "$@"
}

run_tsan() {
  build build-tsan thread threads || return
  # UCX's memory hooks (libucm) patch madvise, which glibc calls on a thread's stack as the thread
  # exits, after TSan has let the thread go: TSan crashes there. strata needs none of the hooks.
  UCX_MEM_MMAP_HOOK_MODE=none \
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L '^threads$' "$@"
}

case "$mode" in
  asan) run_asan "$@" ;;
  tsan) run_tsan "$@" ;;
  all)  # both, even when the first fails
    rc=0
    run_asan "$@" || rc=$?
    run_tsan "$@" || rc=$?
    exit "$rc" ;;
esac
