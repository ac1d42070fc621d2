#!/usr/bin/env bash
# demo.sh: installs dependencies, builds, and runs the 4-rank all-reduce demo as 4 processes
# through strata's launcher (shared memory between them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
build/tools/strata-run -n "${RANKS:-4}" -- build/examples/allreduce_demo "$@"
