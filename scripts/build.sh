#!/usr/bin/env bash
# build.sh: configures and builds strata into ./build (RelWithDebInfo, all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"
