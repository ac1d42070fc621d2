#!/usr/bin/env bash
# fresh_root.sh: a fresh Debian root made with debootstrap from Debian's package registry, where
# strata is installed, built and tested as on a new machine (nothing installed by hand). Root only.
#   scripts/fresh_root.sh create DIR [SUITE]      debootstrap a minimal SUITE (default bookworm) root
#   scripts/fresh_root.sh run DIR [--src PATH] -- CMD...
#                                                  run CMD in DIR as root, in /src (PATH bound there;
#                                                  default: this checkout), with /proc, /sys, /dev,
#                                                  /dev/shm, /run and /tmp of its own
#   scripts/fresh_root.sh prepared DIR SUITE GROUP a SUITE root with `install_deps.sh GROUP` installed,
#                                                  unpacked from a saved copy made by the same
#                                                  install_deps.sh for SUITE and GROUP, or made (and
#                                                  saved) when there is none: a stage that tests on
#                                                  another Debian reuses its root until the package
#                                                  list changes
#   scripts/fresh_root.sh remove DIR               delete DIR (it holds no mounts once run returns)
# Each run is a private mount and PID namespace (unshare): its mounts and every process it started
# are gone when it returns, also on failure or a kill. Shared between roots, so that a second root
# does not download again (the packages are still installed by dpkg in each root):
#   STRATA_ROOT_CACHE (default /var/cache/strata-root): debootstrap's and apt's downloaded .debs
#   and the compiler cache (ccache), bound into the root at /var/cache/apt/archives and
#   /var/cache/ccache; the soft-RoCE guests' kernels (scripts/rdma_vm.sh) at /var/cache/strata-vm.
#   STRATA_ROOT_NO_CCACHE=1 binds an empty one (a cold build, for timings).
# Also bound, read-only: the machine's CUDA toolkit (STRATA_ROOT_CUDA, default /usr/local/cuda; none:
# without) and the checkout's sibling shared/ folder when there is one.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${STRATA_ROOT_CACHE:-/var/cache/strata-root}"

die() { echo "fresh_root.sh: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount namespaces)"

# The mirror this machine's apt uses, so that the root reaches the same registry (debootstrap's
# default when none is configured).
host_mirror() {
  local m=""
  if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -r /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
  fi
  echo "$m"
}

create() {
  local dir="$1" suite="${2:-bookworm}"
  command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
  [ ! -e "$dir" ] || die "$dir exists; remove it first"
  mkdir -p "$cache/debs-$suite" "$dir"
  local mirror
  mirror=$(host_mirror)
  # minbase: apt, dpkg and essential packages only; everything else comes from install_deps.sh.
  if ! debootstrap --variant=minbase --cache-dir="$cache/debs-$suite" "$suite" "$dir" ${mirror:+"$mirror"} \
    >"$dir.debootstrap.log" 2>&1; then
    tail -20 "$dir.debootstrap.log" >&2
    die "debootstrap $suite failed (log: $dir.debootstrap.log)"
  fi
  rm -f "$dir.debootstrap.log"
  # The root's apt sources: main and updates of the same mirror, plus security, as on a new machine.
  local base="${mirror:-http://deb.debian.org/debian}"
  {
    echo "deb $base $suite main"
    echo "deb $base $suite-updates main"
    echo "deb ${base%/debian}/debian-security $suite-security main"
  } >"$dir/etc/apt/sources.list"
  # Keep downloaded .debs (bound to the shared cache at run time); a new machine keeps them too.
  echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$dir/etc/apt/apt.conf.d/10keep-debs"
  rm -f "$dir/etc/apt/apt.conf.d/docker-clean"
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  # /etc/hosts as Debian's installer writes it (debootstrap writes none); the root shares the
  # machine's hostname (UTS namespace).
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" >"$dir/etc/hosts"
  mkdir -p "$dir/src"
  echo "fresh_root.sh: $suite root ready in $dir"
}

# Inside the new namespaces: mount what a machine has, then chroot and run with a clean environment
# (kept: CI, and the OpenBLAS settings this machine's processor needs, which are not installed).
enter() {
  local dir="$1" src="$2" suite="$3" ccache_dir="$4" cuda="$5"
  shift 5
  mount --make-rprivate /
  # The root a mount point of its own, as a machine's / is: `ip netns exec` and `ip -n` remount it
  # (mount --make-rslave /), which fails on a plain folder.
  mount --bind "$dir" "$dir"
  mount -t proc proc "$dir/proc"
  mount --rbind /sys "$dir/sys"
  mount --rbind /dev "$dir/dev"
  mount -t tmpfs -o size=50% tmpfs "$dir/dev/shm"  # its own shared memory, as a machine has
  mount -t tmpfs tmpfs "$dir/run"
  mount -t tmpfs -o size=50% tmpfs "$dir/tmp"
  mkdir -p "$dir/var/cache/apt/archives" "$dir/var/cache/ccache" "$dir/var/cache/strata-vm" "$cache/vm"
  mount --bind "$cache/debs-$suite" "$dir/var/cache/apt/archives"
  mount --bind "$ccache_dir" "$dir/var/cache/ccache"
  mount --bind "$cache/vm" "$dir/var/cache/strata-vm"
  mount --bind "$src" "$dir/src"
  local path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  if [ -n "$cuda" ]; then
    mkdir -p "$dir/usr/local/cuda"
    mount --bind "$cuda" "$dir/usr/local/cuda" && mount -o remount,bind,ro "$dir/usr/local/cuda"
    path="$path:/usr/local/cuda/bin"
  fi
  # The checkout's sibling shared/ (third-party tools some tests use when present), read-only.
  if [ -d "$src/../shared" ]; then
    mkdir -p "$dir/shared"
    mount --bind "$src/../shared" "$dir/shared" && mount -o remount,bind,ro "$dir/shared"
  fi
  exec chroot "$dir" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    PATH="$path" \
    CCACHE_DIR=/var/cache/ccache ${CI:+CI="$CI"} \
    ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE="$OPENBLAS_CORETYPE"} ${OPENBLAS_L2_SIZE:+OPENBLAS_L2_SIZE="$OPENBLAS_L2_SIZE"} \
    bash -c 'cd /src && exec "$@"' bash "$@"
}

run() {
  local dir="$1" src="$here"
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --src) src="$(cd "$2" && pwd)"; shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown argument $1 (usage: run DIR [--src PATH] -- CMD...)" ;;
    esac
  done
  [ $# -gt 0 ] || die "run: no command"
  [ -x "$dir/usr/bin/apt-get" ] || die "$dir is not a root made by 'create'"
  local suite
  suite=$(awk '$1 == "deb" {print $3; exit}' "$dir/etc/apt/sources.list")
  mkdir -p "$cache/debs-$suite" "$cache/ccache"
  local ccache_dir="$cache/ccache"
  if [ "${STRATA_ROOT_NO_CCACHE:-0}" = 1 ]; then
    ccache_dir=$(mktemp -d "$cache/ccache-cold.XXXXXX")
  fi
  # The machine's CUDA toolkit is not a Debian package (this kind of machine, like the GPU machines,
  # ships it in /usr/local/cuda): bound read-only so that the CUDA path builds and its tests register
  # (they skip without a GPU). STRATA_ROOT_CUDA=none leaves it out, as on a user's fresh machine.
  local cuda="${STRATA_ROOT_CUDA:-/usr/local/cuda}"
  if [ "$cuda" = none ] || [ ! -x "$cuda/bin/nvcc" ]; then cuda=""; else cuda=$(realpath "$cuda"); fi
  local rc=0
  unshare --mount --pid --fork --kill-child "$0" __enter "$dir" "$src" "$suite" "$ccache_dir" "$cuda" "$@" || rc=$?
  if [ "${STRATA_ROOT_NO_CCACHE:-0}" = 1 ]; then rm -rf "$ccache_dir"; fi
  return $rc
}

prepared() {
  local dir="$1" suite="$2" group="$3"
  [ ! -e "$dir" ] || die "$dir exists; remove it first"
  local key saved
  key=$( { echo "$suite $group"; cat "$here/scripts/install_deps.sh"; } | sha256sum | cut -c1-16)
  saved="$cache/roots/$suite-$group-$key.tar"
  if [ -f "$saved" ]; then
    mkdir -p "$dir"
    tar -C "$dir" -xf "$saved"
    echo "fresh_root.sh: $suite root with '$group' unpacked from $(basename "$saved")"
    return
  fi
  create "$dir" "$suite"
  run "$dir" -- scripts/install_deps.sh "$group"
  mkdir -p "$cache/roots"
  rm -f "$cache/roots/$suite-$group-"*.tar  # older package lists
  tar -C "$dir" -cf "$saved.tmp" . && mv "$saved.tmp" "$saved"
  echo "fresh_root.sh: $suite root with '$group' saved as $(basename "$saved")"
}

remove() {
  local dir="$1"
  [ -d "$dir" ] || return 0
  # Mounts live only in run's namespace; refuse to delete through one that is somehow still there.
  if grep -q " $(realpath "$dir")/" /proc/self/mounts; then die "$dir still has mounts; not removing"; fi
  rm -rf --one-file-system "$dir"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  create) [ $# -ge 1 ] || die "usage: create DIR [SUITE]"; create "$@" ;;
  run) [ $# -ge 1 ] || die "usage: run DIR [--src PATH] -- CMD..."; run "$@" ;;
  prepared) [ $# -eq 3 ] || die "usage: prepared DIR SUITE GROUP"; prepared "$@" ;;
  remove) [ $# -ge 1 ] || die "usage: remove DIR"; remove "$1" ;;
  __enter) enter "$@" ;;
  *) die "usage: $0 create DIR [SUITE] | run DIR [--src PATH] -- CMD... | prepared DIR SUITE GROUP | remove DIR" ;;
esac
