#!/usr/bin/env bash
# test.sh: installs dependencies, builds everything, and runs the whole test suite through CTest.
#   scripts/test.sh            everything
#   scripts/test.sh -L unit    a label: unit, threads, process, abi, fault, perf, trainer, torch, install
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh all
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 300 "$@"
