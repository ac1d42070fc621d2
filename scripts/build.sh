#!/usr/bin/env bash
# build.sh: configures and builds strata into ./build (RelWithDebInfo, Ninja, all cores, ccache
# when installed).
#   scripts/build.sh                   configure every part (tests, perf tools, PyTorch backend;
#                                      failing when a part's packages are missing) and build it all
#   scripts/build.sh --demo TARGET...  build just TARGET... (and what they link); a build folder not
#                                      configured yet is configured without the tests, perf tools
#                                      and PyTorch backend, which need more packages (install_deps core)
#   scripts/build.sh --torch           the library and the PyTorch backend, with its tests registered
#                                      (label torch; install_deps torch), nothing else
# STRATA_BUILD_DIR: the build folder (default build). STRATA_CMAKE_ARGS: more configure arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
case "${1:-}" in
  --demo) mode=demo; shift ;;
  --torch) mode=torch; shift; set -- strata_torch_ext ;;
esac
build="${STRATA_BUILD_DIR:-build}"
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
# Ninja for a new build folder (it compiles a library's files while the one it links is still
# building, which keeps both cores busy); a folder configured before keeps its generator.
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then args+=(-G Ninja); fi
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ "$mode" = all ]; then
  args+=(-DSTRATA_BUILD_TESTS=ON -DSTRATA_BUILD_PERF=ON -DSTRATA_BUILD_TORCH=ON -DSTRATA_ENABLE_IBVERBS=ON
         -DSTRATA_REQUIRE_ALL=ON)
elif [ "$mode" = torch ]; then
  args+=(-DSTRATA_BUILD_TESTS=ON -DSTRATA_BUILD_PERF=OFF -DSTRATA_BUILD_TORCH=ON -DSTRATA_REQUIRE_ALL=ON)
else
  args+=(-DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_PERF=OFF -DSTRATA_BUILD_TORCH=OFF)
fi
# shellcheck disable=SC2086
if [ "$mode" != demo ] || [ ! -f "$build/CMakeCache.txt" ]; then
  mkdir -p "$build"
  cmake -S . -B "$build" "${args[@]}" ${STRATA_CMAKE_ARGS:-} >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
  grep '^-- strata' "$build/configure.log" || true
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
