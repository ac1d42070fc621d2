#!/usr/bin/env bash
# mpi_on_vcluster.sh: runs an Open MPI program across a virtual cluster of network namespaces
# (make_cluster.sh, the network `strata-run --nodes` builds), for comparisons with strata on it:
#
#   perf/vcluster/mpi_on_vcluster.sh --nodes 2 --ppn 2 --rails 2 --rail-rate 1gbit -- \
#       build/perf/mpi_all_reduce_perf -b 1M -e 64M -f 2
#   # strata on the same network:
#   build/tools/strata-run --nodes 2 --ppn 2 --rails 2 --rail-rate 1gbit -- build/perf/all_reduce_perf -b 1M -e 64M -f 2
#
# mpirun stays in the root namespace and starts one orted per virtual node through an rsh agent
# that enters the node's namespace (`ip netns exec`) with the node's hostname (`unshare --uts`);
# ranks talk TCP over the rails (btl tcp on rail0..rail<R-1>), shared memory (vader) within a node.
# Options: --nodes N --ppn K [--rails R (1)] [--rail-rate RATE (unshaped)] [--node-prefix P]
#          [--mpirun-arg ARG]... (passed to mpirun; repeatable) [--keep-going] -- program [args]
# Prints the bytes each node sent and received per rail afterwards. Needs root; the cluster is removed
# on exit, Ctrl-C or failure (a killed run's is removed by the next run or `strata-run --cleanup-vcluster`).
set -Eeuo pipefail

here=$(cd "$(dirname "$0")" && pwd)
die() { echo "mpi_on_vcluster.sh: $*" >&2; exit 1; }

nodes=0 ppn=0 rails=1 rate="" prefix=vc$$ extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --ppn) ppn=$2; shift 2 ;;
    --rails) rails=$2; shift 2 ;;
    --rail-rate) rate=$2; shift 2 ;;
    --node-prefix) prefix=$2; shift 2 ;;
    --mpirun-arg) extra+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (see the top of this script)" ;;
  esac
done
[ $# -gt 0 ] || die "no program given (... -- program [args])"
[[ $nodes =~ ^[0-9]+$ && $ppn =~ ^[0-9]+$ ]] && (( nodes >= 1 && ppn >= 1 )) || die "--nodes N and --ppn K are required"
[ "$(id -u)" -eq 0 ] || die "needs root (CAP_NET_ADMIN) to create network namespaces"
command -v mpirun >/dev/null || die "mpirun not found (Debian: openmpi-bin)"
command -v unshare >/dev/null || die "unshare not found (util-linux)"

# One virtual cluster at a time on this machine (strata-run takes the same lock). Children must
# not inherit the lock's descriptor.
exec 9>/run/strata-vcluster.lock
if ! flock -n 9; then
  echo "mpi_on_vcluster.sh: waiting for another virtual cluster on this machine to end" >&2
  flock 9
fi

tag=$$
work=$(mktemp -d /tmp/mpi_on_vcluster.XXXXXX)
cleanup() {
  trap - EXIT INT TERM HUP
  VC_QUIET=1 "$here/make_cluster.sh" down --tag "$tag" 9>&- || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

"$here/make_cluster.sh" up --nodes "$nodes" --rails "$rails" ${rate:+--rail-rate "$rate"} --tag "$tag" \
  --node-prefix "$prefix" 9>&-

# The rsh agent: `agent <host> <command words...>` runs the command (a shell snippet, as ssh
# would) on virtual node <prefix>-node<i>.
cat >"$work/agent.sh" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in $prefix-node*) ;; *) echo "agent: unknown virtual host '\$host'" >&2; exit 255 ;; esac
exec ip netns exec "strata-$tag-n\${host##*-node}" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$host" "\$*"
EOF
chmod +x "$work/agent.sh"
for ((i = 0; i < nodes; i++)); do echo "$prefix-node$i slots=$ppn"; done >"$work/hostfile"

ifs=rail0
for ((r = 1; r < rails; r++)); do ifs+=",rail$r"; done
echo "mpi_on_vcluster.sh: $((nodes * ppn)) ranks on $nodes nodes x $ppn, $rails rail(s) ${rate:+at $rate }(tag $tag)" >&2
rc=0
mpirun --allow-run-as-root --oversubscribe \
  --hostfile "$work/hostfile" -np $((nodes * ppn)) --map-by slot \
  --mca plm_rsh_agent "$work/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include "$ifs" \
  --mca oob_tcp_if_include 198.18.0.0/24 \
  "${extra[@]}" "$@" 9>&- || rc=$?
"$here/make_cluster.sh" traffic --tag "$tag" --nodes "$nodes" --rails "$rails" 9>&- >&2 || true
exit "$rc"
