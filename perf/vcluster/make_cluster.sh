#!/usr/bin/env bash
# make_cluster.sh: a virtual cluster of network namespaces like `strata-run --nodes` builds
# (tools/vcluster.h), for running other software (Open MPI: mpi_on_vcluster.sh) on the same network.
#
#   make_cluster.sh up --nodes N [--rails R] [--rail-rate RATE] [--tag PID] [--node-prefix P]
#   make_cluster.sh down [--tag PID]
#   make_cluster.sh sweep            remove every cluster whose tag pid is gone (as strata-run does)
#   make_cluster.sh traffic [--tag PID] [--nodes N] [--rails R]   bytes each node sent/received per rail
#
# Node i is namespace strata-<PID>-n<i> with interfaces rail<r> = 198.18.<r>.<i+1>/24; rail r is the
# bridge st<PID>r<r> in the root namespace (rail 0's has 198.18.0.254) joining veths st<PID>n<i>r<r>.
# With --rail-rate both ends of every veth get `tc tbf` at RATE (tc units: 1gbit, 100mbit, ...).
# PID (default: the caller's, $PPID) must stay alive while the cluster is used: strata-run and
# `sweep` treat clusters of dead pids as stale. Needs root. Only one cluster may use 198.18.0.0/15.
set -Eeuo pipefail

die() { echo "make_cluster.sh: $*" >&2; exit 1; }
log() { [ -n "${VC_QUIET:-}" ] || echo "make_cluster.sh: $*" >&2; }
run() {  # a command, shown with VC_VERBOSE=1; failures name the command
  [ -z "${VC_VERBOSE:-}" ] || echo "+ $*" >&2
  local err
  if ! err=$("$@" 2>&1 >/dev/null); then
    echo "make_cluster.sh: \`$*\` failed: $err" >&2
    return 1
  fi
}

# RATE (tc units) in bits/s.
rate_bits() {
  awk -v r="$1" 'BEGIN {
    if (!match(r, /^[0-9]*\.?[0-9]+/)) exit 1
    v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
    m["bit"] = 1; m[""] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
    m["kibit"] = 1024; m["mibit"] = 1048576; m["gibit"] = 1073741824
    m["bps"] = 8; m["kbps"] = 8e3; m["mbps"] = 8e6; m["gbps"] = 8e9
    if (!(u in m)) exit 1
    printf "%.0f\n", v * m[u] }'
}

cmd=${1:-}
[ -n "$cmd" ] && shift || die "usage: make_cluster.sh up|down|sweep|traffic [options] (see the top of this file)"
nodes=0 rails=1 rate="" tag=$PPID prefix=$(hostname -s 2>/dev/null || echo vnode)
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --rails) rails=$2; shift 2 ;;
    --rail-rate) rate=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --node-prefix) prefix=$2; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ $tag =~ ^[0-9]{1,7}$ ]] || die "--tag must be a pid (1 to 7 digits), got '$tag'"
[[ $nodes =~ ^[0-9]+$ && $rails =~ ^[0-9]+$ ]] || die "--nodes and --rails take numbers"

# Lists objects of clusters as "kind name pid" (kinds: veth bridge netns).
objects() {
  ip netns list | awk '{print $1}' | sed -nE 's/^(strata-([0-9]+)-n[0-9]+)$/netns \1 \2/p'
  ip -o link show | awk -F': ' '{print $2}' | sed -E 's/@.*//' |
    sed -nE -e 's/^(st([0-9]+)n[0-9]+r[0-9]+)$/veth \1 \2/p' -e 's/^(st([0-9]+)r[0-9]+)$/bridge \1 \2/p'
}

# Removes the objects read on stdin ("kind name pid"): veths, then bridges, then namespaces.
remove_objects() {
  local list kind name pid
  list=$(cat)
  for kind in veth bridge netns; do
    while read -r k name pid; do
      [ "$k" = "$kind" ] || continue
      if [ "$kind" = netns ]; then ip netns delete "$name" 2>/dev/null || true
      else ip link delete "$name" 2>/dev/null || true; fi
    done <<<"$list"
  done
}

down() {
  objects | awk -v t="$tag" '$3 == t' | remove_objects
  log "removed the cluster of tag $tag"
}

sweep() {
  local stale
  stale=$(objects | while read -r k name pid; do [ -d "/proc/$pid" ] || echo "$k $name $pid"; done)
  [ -z "$stale" ] || { log "removing stale objects: $(echo "$stale" | awk '{printf "%s ", $2}')"; remove_objects <<<"$stale"; }
}

up() {
  [ "$(id -u)" -eq 0 ] || die "needs root (CAP_NET_ADMIN) to create network namespaces"
  command -v ip >/dev/null || die "the ip command (iproute2) is not installed"
  (( nodes >= 1 && nodes <= 253 )) || die "--nodes must be between 1 and 253"
  (( rails >= 1 && rails <= 8 )) || die "--rails must be between 1 and 8"
  sweep
  local used
  used=$(ip -o -4 addr show to 198.18.0.0/15 | awk '{print $2, $4}')
  [ -z "$used" ] || die "198.18.0.0/15 is already in use ($used): another virtual cluster is up"
  local tbf=()
  if [ -n "$rate" ]; then
    local bits burst
    bits=$(rate_bits "$rate") || die "--rail-rate '$rate' is not a rate (e.g. 1gbit, 100mbit)"
    burst=$(( bits / 8 / 250 > 32768 ? bits / 8 / 250 : 32768 ))
    tbf=(root tbf rate "${bits}bit" burst "$burst" latency 50ms)
  fi
  trap 'echo "make_cluster.sh: setup failed; removing what was made" >&2; down' ERR
  local r i ns veth
  for ((r = 0; r < rails; r++)); do
    run ip link add "st${tag}r$r" type bridge
    run ip link set "st${tag}r$r" up
  done
  run ip addr add 198.18.0.254/24 dev "st${tag}r0"
  for ((i = 0; i < nodes; i++)); do
    ns=strata-$tag-n$i
    run ip netns add "$ns"
    run ip -n "$ns" link set lo up
    for ((r = 0; r < rails; r++)); do
      veth=st${tag}n${i}r$r
      run ip link add "$veth" type veth peer name "rail$r" netns "$ns"
      run ip link set "$veth" master "st${tag}r$r" up
      run ip -n "$ns" addr add "198.18.$r.$((i + 1))/24" dev "rail$r"
      run ip -n "$ns" link set "rail$r" up
      if [ ${#tbf[@]} -gt 0 ]; then
        run tc -n "$ns" qdisc add dev "rail$r" "${tbf[@]}"
        run tc qdisc add dev "$veth" "${tbf[@]}"
      fi
    done
  done
  trap - ERR
  log "virtual cluster: $nodes nodes, $rails rails ${rate:+at $rate }(namespaces strata-$tag-n0..n$((nodes - 1)), tag $tag)"
}

# Per node and rail: bytes the node sent and received (the root-namespace veth end sees them reversed).
traffic() {
  local i r d
  for ((i = 0; i < nodes; i++)); do
    for ((r = 0; r < rails; r++)); do
      d=/sys/class/net/st${tag}n${i}r$r/statistics
      [ -d "$d" ] || continue
      echo "node $i rail $r: sent $(cat "$d/rx_bytes") B, received $(cat "$d/tx_bytes") B"
    done
  done
}

case $cmd in
  up) up ;;
  down) down ;;
  sweep) sweep ;;
  traffic) traffic ;;
  *) die "unknown command '$cmd' (up, down, sweep, traffic)" ;;
esac
