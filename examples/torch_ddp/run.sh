#!/usr/bin/env bash
# run.sh: trains the DDP example for 100 steps with gloo and with strata under torchrun and
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
# torchrun (torch.distributed.run). Debian's PyTorch 1.13 under Python 3.11 cannot parse the default
# "--redirects 0" (IntFlag no longer iterates the zero member), so stdout is teed through a log dir.
for b in gloo strata; do
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node "$nproc" --master_port "$((29400 + RANDOM % 1000))" \
    --redirects 1 --tee 1 --log_dir "$out/logs-$b" \
    "$here/ddp_train.py" --backend "$b" --out "$out/$b.txt" 2>&1 | grep -v -E "^(WARNING|\*+|Setting OMP)" || true
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
