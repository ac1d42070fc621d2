#!/usr/bin/env bash
# worst_of.sh: strata started without binding (perf/unbound/launch.sh, as torchrun or a plain fork
# would) against Open MPI's mpirun, alternating R runs of each; prints every run's out-of-place
# busbw per size, then per size strata's worst and median run, Open MPI's median, and
# worst strata / median Open MPI (the "no collapse" figure).
#
#   perf/unbound/worst_of.sh [-n 2] [--runs 10] [--coll all_reduce] [-b 128K -e 32M -f 4]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=2 runs=10 coll=all_reduce b=128K e=32M f=4 build=build
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n=$2; shift 2;; --runs) runs=$2; shift 2;; --coll) coll=$2; shift 2;;
    -b) b=$2; shift 2;; -e) e=$2; shift 2;; -f) f=$2; shift 2;; --build) build=$2; shift 2;;
    *) echo "worst_of.sh: unknown option $1" >&2; exit 2;;
  esac
done
sweep=(-b "$b" -e "$e" -f "$f" -n 10 -w 3)
mpi=$build/perf/peers/mpi_${coll}_perf
[ -x "$mpi" ] || mpi=$build/perf/mpi_${coll}_perf
out=$(mktemp)
trap 'rm -f "$out"' EXIT
busbw() { awk '/^(\[0\])? *[0-9]+ +[0-9]+ +[a-z0-9_]+ +[a-z]+ +-?[0-9]+ /{sub(/^\[0\]/,""); print $1, $8}'; }
for ((i = 1; i <= runs; i++)); do
  perf/unbound/launch.sh -n "$n" -- "$build/perf/${coll}_perf" "${sweep[@]}" | busbw | sed "s/^/strata $i /" >> "$out" ||
    echo "worst_of.sh: strata run $i failed" >&2
  mpirun --allow-run-as-root --oversubscribe -n "$n" "$mpi" "${sweep[@]}" 2>/dev/null | busbw | sed "s/^/mpi $i /" >> "$out"
done
echo "# ${coll}, ${n} ranks, ${runs} runs each: busbw (GB/s) per run"
sort -k3,3n -k1,1 -k2,2n "$out" | awk '{k=$1" "$3; v[k]=v[k]" "$4} END {for (k in v) print k ":" v[k]}' | sort -k2,2n -k1,1
echo "# size  strata_worst  strata_median  mpi_median  worst/mpi_median"
awk '
  { vals[$1, $3] = vals[$1, $3] " " $4; sizes[$3] = 1 }
  function sorted(s, a,   k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return k }
  END {
    for (s in sizes) {
      k = sorted(vals["strata", s], st); m = sorted(vals["mpi", s], mp)
      med = (k % 2) ? st[(k + 1) / 2] : (st[k / 2] + st[k / 2 + 1]) / 2
      mmed = (m % 2) ? mp[(m + 1) / 2] : (mp[m / 2] + mp[m / 2 + 1]) / 2
      printf "%10d %10.2f %10.2f %10.2f %8.2fx\n", s, st[1], med, mmed, (mmed > 0 ? st[1] / mmed : 0)
    }
  }' "$out" | sort -n
