#!/usr/bin/env bash
# run.sh: trains the small transformer of train.py with FSDP, DTensor tensor parallelism and a 2-D
# DeviceMesh (data x tensor parallel), each with gloo and with strata, and compares them: the
# largest relative loss difference over every step (must be float rounding: < 1e-5) and the median
# step times. Needs PyTorch >= 2.2 (DeviceMesh, parallelize_module); exits 77 (skipped) on older.
#   examples/torch_parallel/run.sh [steps=50] [build dir=build] [modes="fsdp:2 tp:2 dp_tp:4"]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
steps="${1:-50}"
build="$(cd "${2:-$here/../../build}" && pwd)"
modes="${3:-fsdp:2 tp:2 dp_tp:4}"
export PYTHONPATH="$build/integrations/pytorch${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" USE_LIBUV="${USE_LIBUV:-0}"
py=/usr/bin/python3
if ! "$py" -c 'import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(0 if v >= (2, 2) else 1)'; then
  echo "run.sh: SKIPPED: torch $("$py" -c 'import torch; print(torch.__version__)') has no DeviceMesh/DTensor tensor parallelism (needs >= 2.2)"
  exit 77
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
rc=0
for m in $modes; do
  mode="${m%%:*}" n="${m##*:}"
  for b in gloo strata; do
    "$py" "$here/../torch_launch.py" --nproc "$n" "$here/train.py" --mode "$mode" --backend "$b" --steps "$steps" \
      --out "$out/$mode-$b.txt" 2>&1 | grep -v -E "UserWarning|warnings.warn" || true
    test -s "$out/$mode-$b.txt" || { echo "run.sh: $mode with $b wrote no losses" >&2; exit 1; }
  done
  "$py" - "$mode" "$n" "$out/$mode-gloo.txt" "$out/$mode-strata.txt" <<'PY' || rc=1
import sys
mode, n = sys.argv[1], sys.argv[2]
g = [l.split() for l in open(sys.argv[3])]
s = [l.split() for l in open(sys.argv[4])]
assert len(g) == len(s), "different step counts"
rel = [abs(float(a[1]) - float(b[1])) / max(abs(float(a[1])), 1e-30) for a, b in zip(g, s)]
med = lambda rows: sorted(float(r[2]) for r in rows)[len(rows) // 2]
worst = max(rel)
print(f"{mode} ({n} ranks): losses {g[0][1]} -> {g[-1][1]}; gloo vs strata largest relative difference "
      f"{worst:.2e} over {len(rel)} steps; median step gloo {med(g) * 1e3:.1f} ms, strata {med(s) * 1e3:.1f} ms, "
      f"strata {med(g) / med(s):.2f}x faster")
sys.exit(0 if worst < 1e-5 else 1)
PY
done
exit $rc
