#!/bin/bash
# scripts/vm/guest.sh: runs inside a soft-RoCE guest (scripts/rdma_vm.sh), in a chroot of the
# machine's root. Brings up the guest's Ethernet (its virtio NIC when the guest is one of several
# joined by a qemu socket network, else a dummy netdev), puts the kernel's soft-RoCE device rxe0 on
# it, waits for its IPv4 RoCE v2 GID, then runs the job ($SHARE/job.sh, written by rdma_vm.sh) and
# exits with the job's status. The guest's settings come from $SHARE/guest.env.
set -uo pipefail
SHARE="$1"
# shellcheck source=/dev/null
. "$SHARE/guest.env"   # VM_INDEX VM_HOSTNAME VM_ADDR VM_PREFIX VM_MTU
say() { echo "[vm$VM_INDEX +$(cut -d' ' -f1 /proc/uptime)s] $*"; }
hostname "$VM_HOSTNAME"
ip link set lo up
dev=$(for d in /sys/class/net/*; do [ -e "$d/device" ] && basename "$d"; done | head -1)
if [ -z "$dev" ]; then
  dev=d0
  ip link add "$dev" type dummy || { say "cannot create a dummy netdev"; exit 90; }
fi
ip link set "$dev" mtu "$VM_MTU" up || { say "cannot bring $dev up at MTU $VM_MTU"; exit 90; }
ip addr add "$VM_ADDR/$VM_PREFIX" dev "$dev"
rdma link add rxe0 type rxe netdev "$dev" || { say "rdma link add rxe0 on $dev failed"; exit 91; }
# The IPv4-mapped RoCE v2 GID appears shortly after the address: wait for it (5 s at most).
port=/sys/class/infiniband/rxe0/ports/1
gid=
for _ in $(seq 50); do
  for f in "$port"/gids/*; do
    i=${f##*/}
    case "$(cat "$f")" in
      0000:0000:0000:0000:0000:ffff:*)
        [ "$(cat "$port/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && { gid=$i; break 2; } ;;
    esac
  done
  sleep 0.1
done
[ -n "$gid" ] || { say "rxe0 has no IPv4 RoCE v2 GID"; exit 92; }
say "rxe0 on $dev ($VM_ADDR/$VM_PREFIX, MTU $VM_MTU, active_mtu $(ibv_devinfo -d rxe0 2>/dev/null | awk '/active_mtu/ {print $2; exit}')), IPv4 RoCE v2 GID index $gid"
export STRATA_VM_INDEX="$VM_INDEX" STRATA_VM_ADDR="$VM_ADDR" STRATA_VM_NETDEV="$dev" STRATA_VM_GID_INDEX="$gid"
bash "$SHARE/job.sh"
rc=$?
say "job exit code $rc"
exit $rc
