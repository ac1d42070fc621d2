#!/usr/bin/env bash
# rails.sh: multi-rail striping and the network transports on a virtual cluster of network
# namespaces. For each transport (strata's tcp, UCX) it runs the same sweep with one rail (the
# ranks may use rail0 only) and with every rail, alternating runs so that noise hits every case
# alike, and prints each run's bus bandwidth (or time) and the best per case and size.
# Needs root (strata-run --nodes).
#
#   perf/vcluster/rails.sh [--coll sendrecv|all_reduce|...] [--nodes 2 --ppn 1 --rails 2]
#       [--rail-rate 1gbit] [--rounds 3] [-b 64M -e 64M -f 2] [--time] [--transports "tcp ucx"]
set -euo pipefail
cd "$(dirname "$0")/../.."
coll=sendrecv rounds=3 nodes=2 ppn=1 rails=2 rate=1gbit b=64M e=64M f=2 build=build col=8 transports="tcp ucx"
while [ $# -gt 0 ]; do
  case "$1" in
    --coll) coll=$2; shift 2;; --rounds) rounds=$2; shift 2;; --nodes) nodes=$2; shift 2;;
    --ppn) ppn=$2; shift 2;; --rails) rails=$2; shift 2;; --rail-rate) rate=$2; shift 2;;
    -b) b=$2; shift 2;; -e) e=$2; shift 2;; -f) f=$2; shift 2;; --build) build=$2; shift 2;;
    --time) col=6; shift;;  # report the out-of-place time (us) instead of the bus bandwidth
    --transports) transports=$2; shift 2;;
    *) echo "rails.sh: unknown option $1" >&2; exit 2;;
  esac
done
cluster=(--nodes "$nodes" --ppn "$ppn" --rails "$rails")
[ "$rate" != none ] && cluster+=(--rail-rate "$rate")
sweep=(-b "$b" -e "$e" -f "$f" -w 2 -n 5)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pick() { awk -v c="$col" '/^(\[0\])? *[0-9]+ +[0-9]+ +[a-z0-9_]+ +[a-z]+ +-?[0-9]+ /{sub(/^\[0\]/,""); print $1, $c}'; }
for ((r = 1; r <= rounds; r++)); do
  for t in $transports; do
    for which in one all; do
      env=(STRATA_TRANSPORT="$t")
      # One rail: strata's sockets and UCX's devices limited to rail0.
      [ "$which" = one ] && env+=(STRATA_SOCKET_IFNAME=rail0 STRATA_UCX_NET_DEVICES=rail0)
      [ "$which" = all ] && [ "$t" = ucx ] && env+=(STRATA_UCX_NET_DEVICES=$(seq -s, -f 'rail%g' 0 $((rails - 1))))
      env "${env[@]}" "$build/tools/strata-run" "${cluster[@]}" -- "$build/perf/${coll}_perf" "${sweep[@]}" 2>/dev/null |
        pick | sed "s/^/${t}_${which}rail /" | tee -a "$out/all"
    done
  done
done
what=$([ "$col" = 6 ] && echo "lowest time (us)" || echo "best busbw (GB/s)")
echo "# $what of $rounds rounds: ${coll}, ${nodes} nodes x ${ppn} ranks, ${rails} rails ${rate}"
if [ "$col" = 6 ]; then
  sort -k2,2n "$out/all" | awk '{k=$1" "$2; if (!(k in m) || $3 < m[k]) m[k]=$3} END {for (k in m) print k, m[k]}' | sort -k2,2n -k1,1
else
  sort -k2,2n "$out/all" | awk '{k=$1" "$2; if (!(k in m) || $3 > m[k]) m[k]=$3} END {for (k in m) print k, m[k]}' | sort -k2,2n -k1,1
fi
