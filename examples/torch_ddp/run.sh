#!/usr/bin/env bash
# run.sh: trains the DDP example for 100 steps with gloo and with strata (torchrun's way) and
# compares them: the largest loss difference (the first 20 steps must agree to float rounding) and
# the step-time ratio.
#   examples/torch_ddp/run.sh [nproc=2] [build dir=build]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nproc="${1:-2}"
build="$(cd "${2:-$here/../../build}" && pwd)"
export PYTHONPATH="$build/integrations/pytorch${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# The ranks start as torchrun starts them (env://), through examples/torch_launch.py: Debian 13's
# torch 2.6 lacks the libuv its torchrun insists on, and Debian 12's torchrun 1.13 cannot parse its
# own default "--redirects 0" under Python 3.11.
export USE_LIBUV="${USE_LIBUV:-0}"
for b in gloo strata; do
  /usr/bin/python3 "$here/../torch_launch.py" --nproc "$nproc" "$here/ddp_train.py" --backend "$b" --out "$out/$b.txt"
  test -s "$out/$b.txt" || { echo "run.sh: the $b run wrote no losses" >&2; exit 1; }
done
/usr/bin/python3 - "$out/gloo.txt" "$out/strata.txt" <<'PY'
import sys
g = [l.split() for l in open(sys.argv[1])]
s = [l.split() for l in open(sys.argv[2])]
rel = [abs(float(a[1]) - float(b[1])) / max(abs(float(a[1])), 1e-30) for a, b in zip(g, s)]
med = lambda rows: sorted(float(r[2]) for r in rows)[len(rows) // 2]
# Two backends sum gradients in different orders once there are more than 2 ranks: losses then
# differ by float rounding (~1e-7), which training amplifies over the steps. The first 20 steps
# must agree to rounding; the whole run is reported.
early = max(rel[:20])
print(f"losses, gloo vs strata: largest relative difference {early:.2e} in the first 20 steps, "
      f"{max(rel):.2e} over all {len(rel)}")
print(f"median step: gloo {med(g) * 1e3:.1f} ms, strata {med(s) * 1e3:.1f} ms, strata {med(g) / med(s):.2f}x faster")
sys.exit(0 if early < 1e-5 else 1)
PY
