#!/usr/bin/env bash
# rdma_vm.sh: runs a command on a real verbs stack, the Linux kernel's soft-RoCE driver (rdma_rxe),
# inside qemu guests (software emulation; no KVM, no RDMA in the machine's own kernel needed).
#   scripts/rdma_vm.sh [options] -- CMD...
#     --guests N     1 (default): one guest, rxe0 on a dummy netdev (all ranks share one device)
#                    2: two guests joined by a qemu socket network on the loopback, each with its own
#                    rxe0 on its own virtio NIC (198.18.0.1 and .2): CMD runs in both, concurrently
#     --mtu M[,M2]   netdev MTU per guest (default 1500: RoCE active_mtu 1024; 9000 gives 4096)
#     --timeout S    the whole run, boot included (default 900); past it the guests are killed
#     --mem MB       memory per guest (default 2048)
#     --logs DIR     keep console logs there (default: a temporary folder, deleted on success)
# The guests boot the kernel Debian's linux-image-amd64 points at (downloaded with apt and unpacked,
# never installed) with an initramfs of scripts/vm/init, and see this machine's root read-only over
# 9p (writes go to a tmpfs overlay), so CMD runs the machine's own binaries at the same paths, from
# the current directory. Variables STRATA_*, UCX_*, GTEST_*, CTEST_* are passed on; in the guest
# STRATA_VM_INDEX, STRATA_VM_ADDR, STRATA_VM_NETDEV and STRATA_VM_GID_INDEX describe it, and its
# hostname is strata-vm<index>. Exit status: CMD's (the first failing guest's), 124 on timeout, 3
# when a guest did not report. The kernel and initramfs are cached by kernel version and init
# script in STRATA_VM_CACHE (default /var/cache/strata-vm). Root only; packages: install_deps.sh rdma.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
die() { echo "rdma_vm.sh: $*" >&2; exit 2; }

guests=1 mtus=1500 timeout_s=900 mem=2048 logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --guests) guests="$2"; shift 2 ;;
    --mtu) mtus="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --mem) mem="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (usage: $0 [--guests 1|2] [--mtu M[,M2]] [--timeout S] [--mem MB] [--logs DIR] -- CMD...)" ;;
  esac
done
[ $# -gt 0 ] || die "no command (usage: $0 [options] -- CMD...)"
case "$guests" in 1 | 2) ;; *) die "--guests must be 1 or 2, not '$guests'" ;; esac
[ "$(id -u)" -eq 0 ] || die "needs root (9p export of /, kernel unpacking)"
for tool in qemu-system-x86_64 busybox depmod cpio rdma; do
  command -v "$tool" >/dev/null || die "'$tool' not found: run scripts/install_deps.sh rdma"
done
{ ldd /bin/busybox 2>&1 || true; } | grep -q "not a dynamic" ||
  die "/bin/busybox is not a static binary (package busybox-static): run scripts/install_deps.sh rdma"

# --- the kernel and the initramfs, cached by kernel version and init script -----------------------
cache="${STRATA_VM_CACHE:-/var/cache/strata-vm}"
modules="virtio_pci virtio_net 9pnet_virtio 9p overlay dummy crc32_generic crc32_pclmul rdma_rxe ib_uverbs ib_umad rdma_ucm"
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kpkg" ]; then
  apt-get update -qq
  kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[ -n "$kpkg" ] || die "cannot resolve the kernel package linux-image-amd64 depends on"
kv=${kpkg#linux-image-}
key=$( { echo "$modules"; cat "$here/vm/init"; } | sha256sum | cut -c1-12)
kdir="$cache/$kv"
initrd="$kdir/initramfs-$key.cpio.gz"
if [ ! -f "$kdir/vmlinuz" ] || [ ! -f "$initrd" ]; then
  t0=$SECONDS
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg") || { apt-get update -qq && (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg"); }
  dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/k"
  depmod -b "$tmp/k" "$kv"   # dpkg -x runs no maintainer scripts
  src="$tmp/k/lib/modules/$kv"
  ir="$tmp/ir"
  mkdir -p "$ir"/{bin,dev,proc,sys,tmp,run,lib/modules/"$kv"}
  cp /bin/busybox "$ir/bin/busybox"
  for m in $modules; do
    m=${m//_/[_-]}
    grep -E "/${m}\.ko(\.xz)?:" "$src/modules.dep" | tr -d ':' | tr ' ' '\n'
  done | grep . | sort -u | while read -r f; do
    mkdir -p "$ir/lib/modules/$kv/$(dirname "$f")"
    cp "$src/$f" "$ir/lib/modules/$kv/$f"
  done
  cp "$src"/modules.order "$src"/modules.builtin "$src"/modules.builtin.modinfo "$ir/lib/modules/$kv/"
  depmod -b "$ir" "$kv"
  echo "$modules" >"$ir/modules.list"
  install -m 755 "$here/vm/init" "$ir/init"
  mkdir -p "$kdir"
  (cd "$ir" && find . | cpio -o -H newc --quiet) | gzip -1 >"$initrd.tmp"
  cp "$tmp/k/boot/vmlinuz-$kv" "$kdir/vmlinuz.tmp"
  mv "$kdir/vmlinuz.tmp" "$kdir/vmlinuz"
  rm -f "$kdir"/initramfs-*.cpio.gz
  mv "$initrd.tmp" "$initrd"
  rm -rf "$tmp"
  trap - EXIT
  echo "rdma_vm.sh: kernel $kv and its initramfs prepared in $((SECONDS - t0)) s"
fi

# --- the guests --------------------------------------------------------------------------------
keep_logs=1
if [ -z "$logs" ]; then logs=$(mktemp -d /var/tmp/strata-vm.XXXXXX); keep_logs=0; fi
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
{
  echo "cd $(printf %q "$PWD")"
  while IFS='=' read -r name _; do
    case "$name" in STRATA_* | UCX_* | GTEST_* | CTEST_*) echo "export $name=$(printf %q "${!name}")" ;; esac
  done < <(env)
  printf '%q ' "$@"
  echo
} >"$logs/job.sh"

IFS=, read -r -a mtu_of <<<"$mtus"
port=""
if [ "$guests" = 2 ]; then
  # The socket network: guest 0 listens on a free loopback port, guest 1 connects to it.
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    if ! ss -Hltn "sport = :$p" | grep -q .; then port=$p; break; fi
  done
  [ -n "$port" ] || die "no free loopback port for the guests' network"
fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
t0=$SECONDS
for ((i = 0; i < guests; i++)); do
  share="$logs/vm$i"
  mkdir -p "$share"
  cp "$logs/job.sh" "$share/job.sh"
  rm -f "$share/guest_rc"
  {
    echo "VM_INDEX=$i"
    echo "VM_HOSTNAME=strata-vm$i"
    echo "VM_ADDR=198.18.0.$((i + 1))"
    echo "VM_PREFIX=24"
    echo "VM_MTU=${mtu_of[$i]:-${mtu_of[0]}}"
  } >"$share/guest.env"
  nic=(-nic none)
  if [ "$guests" = 2 ]; then
    if [ "$i" = 0 ]; then sock="listen=127.0.0.1:$port"; else sock="connect=127.0.0.1:$port"; fi
    nic=(-netdev "socket,id=n0,$sock" -device "virtio-net-pci,netdev=n0,mac=02:00:00:00:00:0$((i + 1))")
  fi
  qemu-system-x86_64 -M pc -accel tcg,thread=multi -cpu max -smp 2 -m "$mem" \
    -nodefaults -no-user-config -display none -no-reboot -serial stdio -monitor none "${nic[@]}" \
    -kernel "$kdir/vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 rdinit=/init panic=-1 loglevel=4 mitigations=off strata.guest=$here/vm/guest.sh strata.share=$share" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$share,mount_tag=share,security_model=none" \
    </dev/null >"$share/console.log" 2>&1 &
  pids+=($!)
  # Guest 1 connects to guest 0's listening socket: give it a moment to listen.
  [ "$guests" = 2 ] && [ "$i" = 0 ] && sleep 1
done
# Stream the consoles, each line marked with its guest.
for ((i = 0; i < guests; i++)); do
  tail --pid="${pids[$i]}" -n +1 -F "$logs/vm$i/console.log" 2>/dev/null | sed -u "s/^/[vm$i] /" &
done
rc=0
deadline=$((SECONDS + timeout_s))
for p in "${pids[@]}"; do
  while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 1; done
  if kill -0 "$p" 2>/dev/null; then
    echo "rdma_vm.sh: the run passed its ${timeout_s} s limit; guests killed" >&2
    rc=124
    break
  fi
done
cleanup
if [ $rc -eq 0 ]; then
  for ((i = 0; i < guests; i++)); do
    g=$(cat "$logs/vm$i/guest_rc" 2>/dev/null || echo none)
    if [ "$g" = none ]; then
      echo "rdma_vm.sh: guest $i did not report (console: $logs/vm$i/console.log)" >&2
      [ $rc -ne 0 ] || rc=3
    elif [ "$g" != 0 ] && [ $rc -eq 0 ]; then
      rc=$g
    fi
  done
fi
echo "rdma_vm.sh: $guests guest(s), kernel $kv, exit status $rc, $((SECONDS - t0)) s"
if [ $rc -eq 0 ] && [ $keep_logs = 0 ]; then rm -rf "$logs"; else echo "rdma_vm.sh: logs in $logs"; fi
exit $rc
