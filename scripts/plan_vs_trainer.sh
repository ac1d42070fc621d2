#!/usr/bin/env bash
# plan_vs_trainer.sh: the planner's small-scale check (docs/PLANNER.md, "Small scale"). strata-plan
# ranks every layout of a model file for N CPU ranks on this machine (--host-ranks), then each
# layout is run with the reference trainer (the flags the planner writes) and its measured step
# time is set beside the prediction. The planner is given one measurement: the model's step on a
# single rank (strata-plan --host-step-seconds), which fixes this machine's compute rate; every
# parallel layout's time is predicted from it. Prints a Markdown table, the rank correlation, and whether
# the planner's pick is the layout that measured fastest.
#
#   scripts/plan_vs_trainer.sh [BUILD_DIR] [MODEL_FILE] [RANKS] [STEPS]
#   (extra strata-plan options in PLAN_OPTS, e.g. PLAN_OPTS="--zero 0 --mbs 1 --quick")
#
# On a virtual cluster (root: strata-run --nodes, network namespaces with shaped rails), the same
# with VC_NODES=N [VC_RAILS=R] [VC_RATE_MBIT=M]: the ranks run node-major on N namespaces whose R
# rails are shaped to M Mbit/s, and the planner is told the same (--host-nodes/--host-rails/
# --host-rail-mbit). The one-rank calibration run stays outside the cluster.
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-planner/models/trainer_small.json}
RANKS=${3:-8}
STEPS=${4:-6}
PLAN_OPTS=${PLAN_OPTS:---zero 0 1 --mbs 1 --quick}
VC_NODES=${VC_NODES:-1}
VC_RAILS=${VC_RAILS:-1}
VC_RATE_MBIT=${VC_RATE_MBIT:-0}
run_opts=(-n "$RANKS")
net_opts=()
if (( VC_NODES > 1 )); then
  run_opts=(--nodes "$VC_NODES" --ppn $((RANKS / VC_NODES)) --rails "$VC_RAILS")
  net_opts=(--host-nodes "$VC_NODES" --host-rails "$VC_RAILS")
  if [[ "$VC_RATE_MBIT" != 0 ]]; then
    run_opts+=(--rail-rate "${VC_RATE_MBIT}mbit")
    net_opts+=(--host-rail-mbit "$VC_RATE_MBIT")
  fi
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

tokens=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['global_batch']*m['seq'])" "$MODEL")
step_of() {  # step seconds from a trainer run's "mean of steps" line (tokens / tok/s)
  local tps
  tps=$(sed -n 's/.*mean of steps [0-9-]*, over ranks: *\([0-9.]*\) tok\/s.*/\1/p' | head -1)
  [[ -n "$tps" ]] && python3 -c "print($tokens/$tps)"
}

# The one measurement the planner is given: the model's step on one rank (its compute rate here).
model_flags=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(' '.join(f'--{k} {m[k]}' for k in ('layers','hidden','heads','seq','vocab','experts','topk') if k in m), '--batch', m['global_batch'], '--microbatches', m['global_batch'])" "$MODEL")
# shellcheck disable=SC2086
one=$("$BUILD/examples/trainer/strata-train" $model_flags --steps "$STEPS" 2>&1 | step_of)
[[ -n "$one" ]] || { echo "the one-rank run printed no 'mean of steps' line" >&2; exit 1; }
echo "one rank: $one s per step (the planner's calibration)"

# shellcheck disable=SC2086
"$BUILD/planner/strata-plan" --host-ranks "$RANKS" "${net_opts[@]}" --model "$MODEL" --host-step-seconds "$one" $PLAN_OPTS --top 3 \
  --ranking-out "$WORK/ranking.tsv" > "$WORK/plan.txt"
grep -m1 '^cluster:' "$WORK/plan.txt"

while IFS=$'\t' read -r rank predicted layout flags; do
  # shellcheck disable=SC2086
  out=$("$BUILD/tools/strata-run" "${run_opts[@]}" -- "$BUILD/examples/trainer/strata-train" $flags --steps "$STEPS" 2>&1) || {
    echo "$layout: the trainer failed:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  measured=$(echo "$out" | step_of)
  [[ -n "$measured" ]] || { echo "$layout: no 'mean of steps' line" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\n' "$rank" "$predicted" "$measured" "$layout"
done < "$WORK/ranking.tsv" > "$WORK/measured.tsv"

python3 - "$WORK/measured.tsv" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
rows = [(int(r), float(p), float(m), lay) for r, p, m, lay in rows]
by_meas = sorted(rows, key=lambda x: x[2])
mrank = {lay: i + 1 for i, (_, _, _, lay) in enumerate(by_meas)}
print("| planner rank | layout | predicted step s | measured step s | error | measured rank |")
print("|---|---|---|---|---|---|")
for r, p, m, lay in rows:
    print(f"| {r} | {lay} | {p:.3f} | {m:.3f} | {100 * (p / m - 1):+.1f}% | {mrank[lay]} |")
n = len(rows)
d2 = sum((r - mrank[lay]) ** 2 for r, _, _, lay in rows)
rho = 1 - 6 * d2 / (n * (n * n - 1)) if n > 1 else 1.0
errs = [abs(p / m - 1) for _, p, m, _ in rows]
pick = rows[0]
best = by_meas[0]
print(f"\n{n} layouts; mean |error| {100 * sum(errs) / n:.1f}%, max {100 * max(errs):.1f}%; "
      f"Spearman rank correlation {rho:+.2f}")
print(f"planner's pick: {pick[3]} measured {pick[2]:.3f} s (rank {mrank[pick[3]]}); "
      f"fastest measured: {best[3]} {best[2]:.3f} s; the pick is {100 * (pick[2] / best[2] - 1):+.1f}% slower")
PY
