#!/bin/bash
# scripts/vm/two_node_job.sh BUILD_DIR: the two-machine soft-RoCE run (scripts/rdma_two_nodes.sh runs
# it in both guests at once). Guest i runs ranks 2i and 2i+1 of a 4-rank job that joins with
# torchrun's variables (the root at guest 0, 198.18.0.1), so the two nodes are two kernels, two rxe
# devices on two Ethernet segments' ends, joined only by the qemu socket network. In sequence:
# every collective exact (strata_check_worker --topology --quick) with STRATA_TRANSPORT=ib, ucx and
# auto (each rank prints the transport it got per peer), then rank 3 SIGKILLed inside an
# all-reduce over ib (every survivor must name it). Exit status: the first failing step's.
set -uo pipefail
build="$1"
i="$STRATA_VM_INDEX"
export WORLD_SIZE=4 MASTER_ADDR=198.18.0.1 STRATA_SOCKET_IFNAME="$STRATA_VM_NETDEV" STRATA_TIMEOUT=60
export UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n
out=$(mktemp -d)
rc=0
step() {  # step NAME PORT TRANSPORT CMD...: ranks 2i, 2i+1 of one job
  local name="$1" port="$2" transport="$3" t0=$SECONDS
  shift 3
  local pids=() codes=()
  for l in 0 1; do
    RANK=$((2 * i + l)) LOCAL_RANK=$l LOCAL_WORLD_SIZE=2 MASTER_PORT=$port STRATA_TRANSPORT=$transport \
      "$@" >"$out/$name.$l" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; codes+=($?); done
  echo "== $name (STRATA_TRANSPORT=$transport) on strata-vm$i: exit codes ${codes[*]}, $((SECONDS - t0)) s"
  grep -hE "transports:|checks passed|failed as expected|no error|FAIL|init failed|error" "$out/$name".* | head -20
  echo "$name ${codes[*]}" >>"$out/codes"
}
step collectives_ib 29601 ib "$build/tests/strata_check_worker" --topology --quick --transports
step collectives_ucx 29602 ucx "$build/tests/strata_check_worker" --topology --quick --transports
step collectives_auto 29603 auto "$build/tests/strata_check_worker" --topology --quick --transports
step kill_ib 29604 ib "$build/tests/strata_check_worker" --kill-rank 3 --kill-after-ms 1500
# Verdicts: every sweep exact on both ranks of this guest; the transports between the guests as
# asked (auto: UCX, since both ends have an RDMA device and UCX); every survivor of the kill named rank 3.
for name in collectives_ib collectives_ucx collectives_auto; do
  want=${name#collectives_}
  [ "$want" = auto ] && want=ucx
  for l in 0 1; do
    f="$out/$name.$l"
    grep -q "checks passed, 0 failed" "$f" || { echo "FAIL $name rank $((2 * i + l)): not exact"; rc=1; }
    other=$((2 * (1 - i)))
    grep -qE "transports:.* $other:$want( |$)" "$f" || { echo "FAIL $name rank $((2 * i + l)): not $want to rank $other"; rc=1; }
  done
done
for l in 0 1; do
  r=$((2 * i + l))
  [ $r = 3 ] && continue
  grep -q "rank $r: failed as expected.*rank 3" "$out/kill_ib.$l" || { echo "FAIL kill_ib rank $r: did not name rank 3"; rc=1; }
done
echo "two_node_job on strata-vm$i: $([ $rc = 0 ] && echo PASS || echo FAIL)"
rm -rf "$out"
exit $rc
