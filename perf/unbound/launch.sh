#!/usr/bin/env bash
# launch.sh: starts N copies of a program the way torchrun or a user's own fork loop does: no CPU
# binding, rank identity only in RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR /
# MASTER_PORT (strataCommInitFromEnv reads them). Rank 0's output is shown, the others' only when
# they fail. Exits with the first failing rank's code (the others are killed), else 0.
#
#   perf/unbound/launch.sh -n 4 -- build/perf/all_reduce_perf -b 128K -e 32M
set -uo pipefail
n=2
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n=$2; shift 2;;
    --) shift; break;;
    *) echo "launch.sh: unknown option $1 (usage: launch.sh -n N -- program [args])" >&2; exit 2;;
  esac
done
[ $# -gt 0 ] || { echo "launch.sh: no program" >&2; exit 2; }
# A port the kernel just handed out (and released): free unless another job takes it meanwhile.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
logs=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; rm -rf "$logs"; }
trap cleanup EXIT INT TERM
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$@" > "$logs/$r.out" 2>&1 &
  pids+=($!)
done
rc=0
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}"
  code=$?
  if [ $code -ne 0 ] && [ $rc -eq 0 ]; then
    rc=$code
    echo "launch.sh: rank $r exited with code $code:" >&2
    tail -20 "$logs/$r.out" >&2
    kill "${pids[@]}" 2>/dev/null
  fi
done
cat "$logs/0.out"
exit $rc
