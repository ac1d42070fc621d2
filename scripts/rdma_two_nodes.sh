#!/usr/bin/env bash
# rdma_two_nodes.sh [BUILD_DIR]: a real two-node RoCE run on soft-RoCE: two qemu guests joined by a
# socket network on the loopback, each with its own rxe0 (MTU 1500 and 9000, so the path MTU is
# negotiated down to 1024), 2 ranks on each (scripts/vm/two_node_job.sh: every collective over ib,
# ucx and auto, a killed rank over ib). About 90 s on 2 cores; CI's rdma stage runs it; docs/RDMA.md
# has a report. Root only; packages: scripts/install_deps.sh rdma.
set -euo pipefail
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
exec scripts/rdma_vm.sh --guests 2 --mtu 1500,9000 --mem 1536 --timeout 1800 -- \
  bash "$PWD/scripts/vm/two_node_job.sh" "$build"
