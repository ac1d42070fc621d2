#!/usr/bin/env bash
# demo.sh: installs what the demo needs (install_deps.sh core), builds only the library, strata-run
# and the demo, and runs the 4-rank all-reduce demo as 4 processes through strata's launcher (shared
# memory between them). scripts/test.sh builds and tests everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh core
scripts/build.sh --demo strata-run allreduce_demo
build/tools/strata-run -n "${RANKS:-4}" -- build/examples/allreduce_demo "$@"
