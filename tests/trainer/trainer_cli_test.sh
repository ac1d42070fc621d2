#!/usr/bin/env bash
# trainer_cli_test.sh CHECK STRATA_TRAIN STRATA_RUN WORKDIR: end-to-end checks of strata-train.
#   processes   8 rank processes (dp2 x tp2 x pp2) and 4 rank threads match the 1-rank loss curve
#   checkpoint  saved under one layout, resumed under another: the same losses as an unbroken run
#   elastic     --elastic dp4: a rank killed at a random step, the survivors shrink to dp3 and resume
#               from the last checkpoint with the losses of a dp3 run from that checkpoint
#   learn       the copy task falls near zero; text falls below the corpus' unigram entropy
#   invalid     bad layouts are refused on every rank before training, exit code 2
#   zero3mem    ZeRO-3 keeps only shards resident: < (1/dp + 1/layers) of the full model at start, < full at peak
#   plot        --plot writes a PNG (skipped, exit 77, without gnuplot)
#   trace       4 processes dp2 x pp2 with the zero-bubble schedule write one merged --trace: every
#               rank, both threads, F/B/W passes and layers, collectives with group and bytes;
#               render_trace.py draws it; --print-schedule draws ZB-H1 with its bubble
#   device      --device cuda where it cannot run (no CUDA build, or no CUDA device) fails at once
#               with exit code 3 and says why, as one rank, as 2 processes and as --parity-case;
#               skipped (77) where a CUDA device is usable (the gpu-labelled tests run it there)
#   deterministic  dp4 with --deterministic: every forced all-reduce algorithm, and the 4 ranks on
#               2 virtual nodes x 2 (tcp between them), write byte-identical loss logs; without
#               it, ring and one-shot differ in the last digits (so the comparison can fail)
set -euo pipefail
check=$1 train=$2 run=$3 work=$4
topo_files=$(cd "$(dirname "$0")/../../topology/files" && pwd)
trainer_dir=$(cd "$(dirname "$0")/../../examples/trainer" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work"
model=(--layers 4 --hidden 32 --heads 4 --seq 16 --vocab 256 --batch 8 --data text --quiet)

# same_losses A B [FIRST_STEP]: every step >= FIRST_STEP in both logs agrees within 1e-5 relative.
same_losses() {
  awk -v first="${3:-1}" 'NR == FNR { a[$1] = $2; next }
    $1 >= first { n++; if (!($1 in a)) { print "step " $1 " missing"; bad = 1; next }
      d = a[$1] - $2; if (d < 0) d = -d; r = d / (a[$1] < 0 ? -a[$1] : a[$1]);
      if (r > worst) worst = r; if (r > 1e-5) { print "step " $1 ": " a[$1] " vs " $2; bad = 1 } }
    END { printf "%d steps compared, max rel diff %.2e\n", n, worst; if (bad || n == 0) exit 1 }' "$1" "$2"
}

case $check in
device)
  set +e
  out=$("$train" --device cuda "${model[@]}" --steps 2 2>&1); rc=$?
  set -e
  echo "$out"
  if [ $rc -eq 0 ] || grep -q "^step" <<<"$out"; then
    echo "a CUDA device is usable here: nothing to refuse"; exit 77
  fi
  [ $rc -eq 3 ] || { echo "expected exit code 3, got $rc"; exit 1; }
  grep -Eq "strata-train: --device cuda: (no CUDA device|this strata-train was built without CUDA)" <<<"$out" \
    || { echo "no reason given"; exit 1; }
  set +e
  out=$(timeout 60 "$run" -n 2 -- "$train" --device cuda --dp 2 "${model[@]}" --steps 2 2>&1); rc=$?
  out2=$(timeout 60 "$train" --device cuda --parity-case dp2 2>&1); rc2=$?
  set -e
  echo "$out"; echo "$out2"
  [ $rc -ne 0 ] && ! grep -q "^step" <<<"$out" || { echo "2 processes: not refused (rc $rc)"; exit 1; }
  grep -q -- "--device cuda:" <<<"$out" || { echo "2 processes: no reason given"; exit 1; }
  [ $rc2 -eq 3 ] && grep -q -- "--device cuda:" <<<"$out2" || { echo "--parity-case: rc $rc2"; exit 1; }
  "$train" "${model[@]}" --steps 1 --device cpu | grep -q "final loss" || { echo "--device cpu does not train"; exit 1; }
  echo "device: refused with exit code 3 and a reason"
  ;;
deterministic)
  dp4=("${model[@]}" --steps 6 --dp 4)
  for algo in ring oneshot; do
    STRATA_ALGO=$algo "$run" -n 4 --threads -- "$train" "${dp4[@]}" --loss-log plain_$algo.log
  done
  if cmp -s plain_ring.log plain_oneshot.log; then
    echo "ring and one-shot gave identical losses without --deterministic: the check below proves nothing"
    exit 1
  fi
  for algo in auto ring rhd tree direct oneshot; do
    STRATA_ALGO=$algo "$run" -n 4 --threads -- "$train" "${dp4[@]}" --deterministic --loss-log det_$algo.log
  done
  STRATA_TOPO_FILE=$topo_files/virtual_2x2.json "$run" -n 4 --threads -- "$train" "${dp4[@]}" --deterministic \
    --loss-log det_vnodes.log
  STRATA_TOPO_FILE=$topo_files/virtual_2x2.json STRATA_ALGO=hier "$run" -n 4 -- "$train" "${dp4[@]}" \
    --deterministic --loss-log det_vnodes_processes.log
  for f in det_*.log; do
    cmp det_auto.log "$f" || { paste det_auto.log "$f"; exit 1; }
  done
  echo "$(ls det_*.log | wc -l) deterministic runs, byte-identical loss logs"
  ;;
zero3mem)
  "$run" -n 2 --threads -- "$train" --layers 4 --hidden 32 --heads 4 --seq 16 --vocab 256 --batch 8 --data text \
    --steps 2 --dp 2 --zero 3 > out.txt
  grep resident out.txt
  grep -q 'resident at start (sharded' out.txt
  grep 'resident' out.txt | grep -o 'r[0-9]* [0-9]*/[0-9]* B' | awk -v dp=2 -v layers=4 '
    { split($2, a, "/"); n++; bound = (NR <= 2) ? a[2] * (1 / dp + 1 / layers) : a[2];
      if (a[1] + 0 >= bound) { print "rank " $1 ": " a[1] " B resident, bound " bound; bad = 1 } }
    END { if (bad || n != 4) exit 1 }'
  ;;
processes)
  "$train" "${model[@]}" --steps 6 --microbatches 4 --loss-log ref.log
  "$run" -n 8 -- "$train" "${model[@]}" --steps 6 --dp 2 --tp 2 --pp 2 --microbatches 2 --loss-log p8.log
  same_losses ref.log p8.log
  "$train" "${model[@]}" --steps 6 --microbatches 1 --loss-log ref1.log
  "$run" -n 4 --threads -- "$train" "${model[@]}" --steps 6 --tp 2 --cp 2 --sp --loss-log t4.log
  same_losses ref1.log t4.log
  ;;
checkpoint)
  "$train" "${model[@]}" --steps 10 --microbatches 2 --loss-log full.log
  # 1 rank -> dp2 zero3 (sharded optimizer state rebuilt from full tensors)
  "$train" "${model[@]}" --steps 10 --save-at 5 --save ck1 --microbatches 2 --loss-log a.log
  "$run" -n 2 --threads -- "$train" "${model[@]}" --steps 10 --dp 2 --zero 3 --load ck1 --loss-log b.log
  same_losses full.log b.log 6
  # tp2 x pp2 -> 1 rank
  "$run" -n 4 --threads -- "$train" "${model[@]}" --steps 5 --tp 2 --pp 2 --microbatches 2 --save ck2 \
    --loss-log c.log
  "$train" "${model[@]}" --steps 10 --microbatches 2 --load ck2 --loss-log d.log
  same_losses full.log d.log 6
  test -f ck2/meta.json && test -f ck2/wte.bin && test -f ck2/h3.mlp.fc.w.bin
  # MoE: experts sharded over ep2 (with tp2 and zero2) -> 1 rank, and 1 rank -> ep2 x pp2
  moe=(--experts 4 --topk 2 --capacity-factor 1)
  "$train" "${model[@]}" "${moe[@]}" --steps 8 --microbatches 2 --loss-log mfull.log
  "$run" -n 4 --threads -- "$train" "${model[@]}" "${moe[@]}" --steps 4 --tp 2 --ep 2 --zero 2 --save ck3 \
    --loss-log m1.log
  "$train" "${model[@]}" "${moe[@]}" --steps 8 --microbatches 2 --load ck3 --loss-log m2.log
  same_losses mfull.log m2.log 5
  "$run" -n 4 -- "$train" "${model[@]}" "${moe[@]}" --steps 8 --ep 2 --pp 2 --schedule gpipe --load ck3 \
    --loss-log m3.log
  same_losses mfull.log m3.log 5
  ;;
elastic)
  # 4 data ranks; one SIGKILLs itself at the start of a step: the 3 survivors shrink the world
  # (finding the dead rank themselves), rebuild dp3 with the same global batch, resume from the
  # last checkpoint (saved every 2 steps) and finish. Their losses from the checkpoint on must be
  # those of a dp3 run started from that same checkpoint (made by a clean dp4 run to that step).
  # Rank 0 (the shrink's gatherer and the reporter) dies in one case; the other victim, its step
  # and the ZeRO stage are drawn at random (printed, to replay a failure).
  for spec in "0 $((3 + RANDOM % 5)) 1" "$((1 + RANDOM % 3)) $((3 + RANDOM % 5)) $((RANDOM % 4))"; do
    read -r victim step zero <<<"$spec"
    ck=$(( (step - 1) / 2 * 2 ))
    echo "== rank $victim dies at step $step, zero $zero; survivors resume from step $ck"
    rm -rf ck ref el.log a.log b.log
    e=(--layers 4 --hidden 32 --heads 4 --seq 16 --vocab 256 --data text --quiet --batch 12 --zero "$zero")
    "$run" --keep-going -n 4 -- "$train" "${e[@]}" --dp 4 --steps 8 --elastic --save ck --save-every 2 \
      --fail-rank "$victim" --fail-step "$step" --loss-log el.log > out.txt 2>&1 || { cat out.txt; exit 1; }
    grep -q "rank $victim killed by signal SIGKILL; the others go on" out.txt || { cat out.txt; exit 1; }
    grep "elastic: 3 of 4 ranks left" out.txt || { cat out.txt; exit 1; }
    "$run" -n 4 -- "$train" "${e[@]}" --dp 4 --steps "$ck" --save ref --loss-log a.log
    "$run" -n 3 -- "$train" "${e[@]}" --dp 3 --steps 8 --load ref --loss-log b.log
    same_losses b.log el.log $((ck + 1))
    [ "$(awk '$1 == 8' el.log | wc -l)" = 1 ] || { echo "step 8 missing from the elastic run"; exit 1; }
  done
  # Refused: --elastic with another parallel dimension, or without --save.
  set +e
  "$train" "${model[@]}" --elastic --save x --tp 2 > bad.txt 2>&1; rc1=$?
  "$train" "${model[@]}" --elastic > bad2.txt 2>&1; rc2=$?
  set -e
  cat bad.txt bad2.txt
  [ $rc1 = 2 ] && grep -q "shrinks data parallelism only" bad.txt
  [ $rc2 = 2 ] && grep -q "needs --save" bad2.txt
  ;;
learn)
  "$train" --steps 300 --seed 3 --loss-log copy.log | tee copy.out
  awk 'END { if ($2 > 0.1) { print "copy task loss " $2 " did not fall below 0.1"; exit 1 } }' copy.log
  "$train" --data text --vocab 256 --hidden 32 --heads 4 --layers 2 --seq 32 --batch 16 --steps 200 --lr 3e-3 \
    --loss-log text.log | tee text.out
  entropy=$(sed -n 's/.*unigram entropy of the corpus \([0-9.]*\).*/\1/p' text.out)
  awk -v h="$entropy" 'END { if ($2 >= h - 0.3) { print "text loss " $2 " not well below unigram entropy " h; exit 1 }
    print "text loss " $2 " < unigram entropy " h }' text.log
  ;;
invalid)
  for args in "--tp 2 --heads 3 --hidden 33" "--tp 2 --vocab 63" "--pp 2 --layers 3 --microbatches 2" \
              "--pp 2 --microbatches 1" "--ep 2 --experts 3" "--dp 3"; do
    set +e
    "$run" -n 2 -- "$train" $args > out.txt 2>&1
    rc=$?
    set -e
    cat out.txt
    [ "$rc" = 2 ] || { echo "expected exit 2 for '$args', got $rc"; exit 1; }
    grep -q '^\[0\] strata-train: invalid layout' out.txt && grep -q '^\[1\] strata-train: invalid layout' out.txt ||
      { echo "'$args' was not refused on every rank"; exit 1; }
    if grep -qE '^\[[0-9]+\] step +[0-9]+ \| loss' out.txt; then echo "training started for '$args'"; exit 1; fi
  done
  ;;
trace)
  "$train" --pp 4 --layers 4 --microbatches 8 --schedule zb --print-schedule | tee grid.txt
  grep -q 'bubble 0.111 (formula 0.111)' grid.txt
  grep -q 'peak in-flight microbatches per stage: 4 4 4 4' grid.txt
  "$run" -n 4 -- "$train" "${model[@]}" --steps 2 --dp 2 --pp 2 --schedule zb --microbatches 2 --trace trace.json
  command -v python3 >/dev/null || { echo "python3 not installed: the trace is not checked"; exit 77; }
  python3 - trace.json <<'EOF'
import json, sys
x = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X']
assert {e['pid'] for e in x} == {0, 1, 2, 3}, 'every rank'
assert any(e['tid'] == 1 and e['cat'] == 'collective' and e['args']['comm'] == 'dp' for e in x), 'dp reduction'
for op in 'FBW':
    assert any(e['cat'] == 'pass' and e['name'].startswith(op + ' mb') for e in x), op
assert any(e['cat'] == 'layer' and e['name'].startswith('W layer') for e in x), 'W per layer'
assert any(e['cat'] == 'pipe' and e['args']['comm'] == 'pp' for e in x), 'pipeline transfers'
assert any(e['name'] == 'optimizer' for e in x), 'optimizer'
assert all(e['args']['bytes'] > 0 for e in x if e['cat'] == 'collective'), 'bytes'
print(len(x), 'spans')
EOF
  python3 "$trainer_dir/render_trace.py" trace.png trace.json
  head -c 4 trace.png | grep -q PNG
  ;;
plot)
  command -v gnuplot >/dev/null || { echo "gnuplot not installed: skipped"; exit 77; }
  "$train" --steps 20 --plot loss.png
  test -s loss.png && head -c 4 loss.png | grep -q PNG
  ;;
*)
  echo "unknown check $check"; exit 2 ;;
esac
echo "$check: ok"
