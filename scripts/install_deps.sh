#!/usr/bin/env bash
# install_deps.sh: installs strata's build and test dependencies from Debian 12's packages.
# Idempotent; uses sudo when not root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config libibverbs-dev libucx-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libfmt-dev libhwloc-dev gnuplot-nox graphviz iproute2 \
  openmpi-bin libopenmpi-dev libgloo-dev python3 python3-matplotlib \
  python3-torch libtorch-dev >/dev/null
echo "install_deps: done"
