#!/usr/bin/env bash
# compare.sh: strata (auto, hier and a flat algorithm) against Open MPI and Gloo (its tcp device on
# rail0; --no-gloo leaves it out) on the same virtual cluster
# of network namespaces, alternating runs so that noise hits every contender alike; prints the
# bus bandwidth of every run and the best per contender and size. Needs root (strata-run --nodes).
#
#   perf/vcluster/compare.sh [--coll all_reduce|alltoall|...] [--flat ring] [--rounds 3]
#       [--nodes 2 --ppn 2 --rails 2 --rail-rate 1gbit] [-b 16M -e 64M -f 4]
set -euo pipefail
cd "$(dirname "$0")/../.."
coll=all_reduce flat=ring rounds=3 nodes=2 ppn=2 rails=2 rate="" b=16M e=64M f=4 build=build gloo=1
while [ $# -gt 0 ]; do
  case "$1" in
    --coll) coll=$2; shift 2;; --flat) flat=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    --nodes) nodes=$2; shift 2;; --ppn) ppn=$2; shift 2;; --rails) rails=$2; shift 2;;
    --rail-rate) rate=$2; shift 2;; -b) b=$2; shift 2;; -e) e=$2; shift 2;; -f) f=$2; shift 2;;
    --build) build=$2; shift 2;; --no-gloo) gloo=0; shift;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2;;
  esac
done
cluster=(--nodes "$nodes" --ppn "$ppn" --rails "$rails")
[ -n "$rate" ] && cluster+=(--rail-rate "$rate")
sweep=(-b "$b" -e "$e" -f "$f" -w 1 -n 5)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
busbw() { awk '/^(\[0\])? *[0-9]+ +[0-9]+ +[a-z0-9_]+ +[a-z]+ +-?[0-9]+ /{sub(/^\[0\]/,""); print $1, $8}'; }
for ((r = 1; r <= rounds; r++)); do
  who_all=(auto hier "$flat" mpi)
  [ "$gloo" = 1 ] && [ -x "$build/perf/gloo_${coll}_perf" ] && who_all+=(gloo)
  for who in "${who_all[@]}"; do
    if [ "$who" = mpi ]; then
      perf/vcluster/mpi_on_vcluster.sh "${cluster[@]}" -- "$build/perf/mpi_${coll}_perf" "${sweep[@]}" 2>/dev/null
    elif [ "$who" = gloo ]; then
      "$build/tools/strata-run" "${cluster[@]}" -- "$build/perf/gloo_${coll}_perf" --iface rail0 "${sweep[@]}" 2>/dev/null
    else
      STRATA_ALGO=$who "$build/tools/strata-run" "${cluster[@]}" -- "$build/perf/${coll}_perf" "${sweep[@]}" 2>/dev/null
    fi | busbw | sed "s/^/$who /" | tee -a "$out/all"
  done
done
echo "# best busbw (GB/s) of $rounds rounds: ${coll}, ${nodes} nodes x ${ppn} ranks, ${rails} rails ${rate:-unshaped}"
sort -k2,2n -k1,1 "$out/all" | awk '{k=$1" "$2; if (!(k in m) || $3 > m[k]) m[k]=$3} END {for (k in m) print k, m[k]}' |
  sort -k2,2n -k1,1
