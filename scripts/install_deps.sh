#!/usr/bin/env bash
# install_deps.sh: installs strata's build and test dependencies from Debian's packages (12; the torch
# group also on 13), by group.
#   scripts/install_deps.sh core   the library, strata-run and the demo (what scripts/demo.sh builds)
#   scripts/install_deps.sh all    core + everything the full build and test suite use (default)
#   scripts/install_deps.sh ci     all + clang for the fuzz and sanitizer stages of .ci/run
#   scripts/install_deps.sh torch  core + PyTorch, pybind11 and GoogleTest: the PyTorch backend and its
#                                  tests (the torch 2.x stage of .ci/run, in a Debian 13 root)
#   scripts/install_deps.sh rdma   core + GoogleTest + what scripts/rdma_vm.sh needs to boot soft-RoCE
#                                  guests (qemu, busybox-static, kmod, cpio, the rxe verbs provider)
# Complete by construction: .ci/run runs it in a fresh debootstrap root (scripts/fresh_root.sh),
# so a package missing here fails CI. Idempotent; uses sudo when not root; --no-install-recommends,
# so every package the build includes or runs is named here, not pulled in as a recommendation.
set -euo pipefail
group="${1:-all}"
core=(build-essential cmake ninja-build pkg-config ccache libcli11-dev nlohmann-json3-dev libfmt-dev libhwloc-dev
      libibverbs-dev libucx-dev)
# Tests, perf tools and their peers (OpenMPI, Gloo), the virtual-cluster tools (ip, tc), plots, CPack's
# Debian packaging (file, with dpkg-dev from build-essential), and
# the PyTorch backend (torch's headers include pybind11's, which libtorch-dev does not depend on).
full=(libgtest-dev libgmock-dev libbenchmark-dev gnuplot-nox graphviz iproute2 file
      openmpi-bin libopenmpi-dev libgloo-dev python3 python3-dev python3-matplotlib
      python3-torch libtorch-dev pybind11-dev)
ci=(clang libclang-rt-14-dev)
# soft-RoCE guests: qemu (software emulation), the initramfs tools, rdma-core's rxe provider and
# ibv_devinfo; iproute2 has `rdma link add` and `ss`.
rdma=(libgtest-dev libgmock-dev qemu-system-x86 busybox-static kmod cpio ibverbs-providers ibverbs-utils iproute2)
torch=(libgtest-dev libgmock-dev iproute2 python3 python3-dev python3-setuptools python3-torch libtorch-dev pybind11-dev)
case "$group" in
  core) pkgs=("${core[@]}") ;;
  all) pkgs=("${core[@]}" "${full[@]}") ;;
  ci) pkgs=("${core[@]}" "${full[@]}" "${ci[@]}") ;;
  torch) pkgs=("${core[@]}" "${torch[@]}") ;;
  rdma) pkgs=("${core[@]}" "${rdma[@]}") ;;
  *) echo "usage: $0 [core|all|ci|torch|rdma]" >&2; exit 2 ;;
esac
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# A machine that is already set up skips apt entirely (no index download).
if dpkg-query -W -f='${Status}\n' "${pkgs[@]}" 2>/dev/null | grep -vq '^install ok installed$' ||
   [ "$(dpkg-query -W -f='${Status}\n' "${pkgs[@]}" 2>/dev/null | wc -l)" -ne "${#pkgs[@]}" ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
echo "install_deps: $group done"
