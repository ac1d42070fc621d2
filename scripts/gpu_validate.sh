#!/usr/bin/env bash
# gpu_validate.sh: the whole validation of strata's CUDA path on a GPU machine, in one command.
# Several ranks share GPU 0 (one H100/H200 is enough); no network is needed.
#
#   scripts/gpu_validate.sh                        every stage; logs and summary under $OUT
#   scripts/gpu_validate.sh nccl-tests torch       info, build, then only these stages
#
# Where one command may run at most 10 minutes, split it (build-gpu/ stays between the calls, so
# the build is incremental after the first), e.g.:
#   GPU_VALIDATE_BUDGET=570 scripts/gpu_validate.sh ctest nccl-build
#   GPU_VALIDATE_BUDGET=570 scripts/gpu_validate.sh nccl-tests
#   GPU_VALIDATE_BUDGET=570 scripts/gpu_validate.sh torch perf
#
# Stages (info and build always run; the build is incremental). Each stage runs even when an earlier
# one failed; $OUT/summary.txt lists PASS / FAIL / SKIP (with the reason) per stage, and the exit
# status is 1 when any stage failed. Without a GPU the GPU stages are SKIPs (a machine without one
# still checks the build, the nccl-tests build and its link to strata).
#   info        nvidia-smi; driver, CUDA, system NCCL, PyTorch, compiler, MPI versions
#   build       strata, Release, -DSTRATA_ENABLE_CUDA=ON, SASS for this GPU, -j$JOBS, into $BUILD_DIR;
#               a failed configure (or a build failing on UCX, ibverbs, PyTorch, GTest or benchmark)
#               is retried with UCX, ibverbs and the PyTorch backend (integrations/pytorch) off,
#               then without the tests, then without perf and examples (missing development
#               packages: no network there to install them; the build log lists the missing Debian
#               packages); a build that times out is not retried
#   ctest       ctest -L gpu -LE trainer_gpu (FAIL when a GPU is present but every test skipped)
#   trainer     strata-train --device cuda: ctest -L trainer_gpu (the dense parity layouts, 2-8 ranks
#               on the one GPU, against the CPU's single-rank losses: step 1 within 1e-5, every step
#               within 1e-4 relative), then tokens/s of dp2 x tp2 x pp2 (8 ranks) and of one rank,
#               hidden 256, on the GPU beside the same run on the CPU (trainer/tokens.txt)
#   nccl-build  NVIDIA's nccl-tests from the carried tarball, against the CUDA toolkit's nccl.h (else
#               the system NCCL's), linked to strata's libnccl.so.2, plus the MPI=1 variant where an
#               MPI with mpi.h is installed; tests/nccl_tests_link/check.sh builds it and checks
#               that every binary resolves its nccl* symbols from strata (no GPU needed)
#   nccl-tests  every nccl-tests binary on strata (its directory first on LD_LIBRARY_PATH,
#               NCCL_TESTS_DEVICE=0, STRATA_LOG_LEVEL=info to prove strata ran): -t 2 and -t 4
#               threads (nccl-tests gives thread i device i: scripts/gpu_fold_devices.c, preloaded,
#               folds those onto GPU 0), 2 and 4 processes under mpirun (MPI variant; nccl-tests
#               without MPI cannot run as several processes, and strata-run cannot stand in for MPI
#               there), then -d all -o all (-t 2) once per binary; FAIL on a nonzero exit, a nonzero
#               #wrong or "Out of bounds values", a table without rows, or no strata log line
#   torch       scripts/gpu_torch_check.py, 2 and 4 processes on cuda:0: with strata LD_PRELOADed,
#               then with the system NCCL (NCCL_MULTI_RANK_GPU_ENABLE=1; where that NCCL still
#               refuses several ranks per GPU (< 2.30) the DDP reference is gloo); DDP losses compared
#   perf        perf/compare --memory device (strata's perf tools vs the system NCCL's, both under
#               strata-run), all-reduce, reduce-scatter, all-gather, all-to-all, broadcast,
#               8 B - 1 GiB, 2 and 4 ranks; FAIL when a strata run fails or reports wrong elements
#
# Environment: OUT (default ./gpu-validate-out), BUILD_DIR (default <repo>/build-gpu), JOBS (default
# nproc), NCCL_TESTS_TARBALL (default <repo>/vendor-gpu/nccl-tests-*.tar.gz, else
# <repo>/../shared/vendor/nccl-tests-*.tar.gz), SYSTEM_NCCL_LIB (the NVIDIA libnccl.so.2 to compare
# with; default: PyTorch's, else the loader's, else the CUDA toolkit's), PYTHON (default python3),
# GPU_VALIDATE_BUDGET (seconds for the whole run, default 1500: stages are cut to what is left),
# GPU_VALIDATE_STRICT=1 (exit 3 when a selected stage was skipped, e.g. no PyTorch or no tarball).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$PWD/gpu-validate-out}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
PY=${PYTHON:-python3}
BUDGET=${GPU_VALIDATE_BUDGET:-1500}
ALL_STAGES="info build ctest trainer nccl-build nccl-tests torch perf"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
mkdir -p "$BUILD" && BUILD=$(cd "$BUILD" && pwd)
SUMMARY=$OUT/summary.txt
T_START=$(date +%s)
exec > >(tee -a "$OUT/gpu_validate.log") 2>&1

SELECTED=$(echo info build "${@:-$ALL_STAGES}" | tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ')
for s in $SELECTED; do
  case " $ALL_STAGES " in *" $s "*) ;; *) echo "gpu_validate: unknown stage '$s' (stages: $ALL_STAGES)"; exit 2 ;; esac
done

# A rank that waits longer than this fails with a message instead of hanging the stage.
export STRATA_TIMEOUT=${STRATA_TIMEOUT:-90}
# NVIDIA NCCL >= 2.30 accepts several ranks on one GPU with this; older ones refuse them.
export NCCL_MULTI_RANK_GPU_ENABLE=${NCCL_MULTI_RANK_GPU_ENABLE:-1}
# Open MPI in containers: no CMA single copy (ptrace may be forbidden); MPI only bootstraps here.
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_sm_single_copy_mechanism=none

# ---- helpers ---------------------------------------------------------------------------------------
elapsed() { echo $(($(date +%s) - T_START)); }
remaining() { echo $((BUDGET - $(elapsed))); }
# cap SECONDS: SECONDS, or what is left of the budget when that is less
cap() { local r; r=$(remaining); [ "$r" -lt 1 ] && r=1; [ "$r" -lt "$1" ] && echo "$r" || echo "$1"; }
say() { echo "[gpu_validate $(elapsed)s] $*"; }
declare -a ROWS=()
FAILED=0 SKIPPED=""
record() {  # STAGE STATUS NOTE
  ROWS+=("$(printf '%-11s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && FAILED=$((FAILED + 1))
  [ "$2" = SKIP ] && [ "$3" != "not selected on the command line" ] && SKIPPED="$SKIPPED $1"
  say "$1: $2${3:+ - $3}"
  write_summary
}
write_summary() {
  {
    echo "gpu_validate summary: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), $(elapsed) s"
    echo "stages run: $SELECTED"
    printf '%-11s %-5s %s\n' stage status note
    printf '%s\n' "${ROWS[@]}"
  } >"$SUMMARY"
}
NOTE=""
run_stage() {  # NAME FUNCTION
  local name=$1 fn=$2 t0 rc status
  case " $SELECTED " in *" $name "*) ;; *) record "$name" SKIP "not selected on the command line"; return ;; esac
  if [ "$(remaining)" -lt 30 ]; then
    record "$name" SKIP "time budget exhausted (GPU_VALIDATE_BUDGET=$BUDGET s)"
    return
  fi
  echo
  say "=== $name ==="
  NOTE=""
  t0=$(date +%s)
  "$fn"
  rc=$?
  case $rc in 0) status=PASS ;; 77) status=SKIP ;; *) status=FAIL ;; esac
  record "$name" "$status" "$NOTE ($(($(date +%s) - t0)) s)"
}
realpath_of() { readlink -f "$1" 2>/dev/null || echo "$1"; }
nccl_version_of() {  # LIB: the version its ncclGetVersion reports (no GPU needed)
  "$PY" - "$1" <<'EOF' 2>/dev/null || echo "unknown"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
v = ctypes.c_int(0)
lib.ncclGetVersion(ctypes.byref(v))
v = v.value
v = v if v >= 10000 else v // 1000 * 10000 + v // 100 % 10 * 100 + v % 100
print(f"{v // 10000}.{v // 100 % 100}.{v % 100}")
EOF
}

# ---- what this machine has -------------------------------------------------------------------------
GPU_COUNT=0 GPU_ARCH=""
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU_COUNT=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  case "$cc" in [0-9][0-9]|[0-9][0-9][0-9]) GPU_ARCH=$cc ;; esac
fi
if [ "$GPU_COUNT" = 0 ] && [ -d /proc/driver/nvidia/gpus ]; then  # a driver without nvidia-smi
  GPU_COUNT=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l)
fi
NVCC=$(command -v nvcc || true)
for c in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
  [ -z "$NVCC" ] && [ -x "$c" ] && NVCC=$c
done
CUDA_HOME=""
if [ -n "$NVCC" ]; then
  CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
  PATH="$(dirname "$NVCC"):$PATH"
  export PATH
fi
HAVE_TORCH=0
"$PY" -c "import torch" >/dev/null 2>&1 && HAVE_TORCH=1
STRATA_LIB=$BUILD/collectives/libnccl.so.2
BUILD_OK=0 TESTS_BUILT=0 PERF_BUILT=0
no_gpu() { NOTE="no GPU (nvidia-smi lists none)"; return 77; }

# The NVIDIA NCCL to compare with: PyTorch's (what torch.distributed runs on), else the loader's,
# else the CUDA toolkit's; never strata's.
find_system_nccl() {
  local c cands=()
  [ -n "${SYSTEM_NCCL_LIB:-}" ] && cands+=("$SYSTEM_NCCL_LIB")
  if [ "$HAVE_TORCH" = 1 ]; then
    c=$(env -u LD_PRELOAD "$PY" -c "
import torch, os
for line in open('/proc/self/maps'):
    p = line.split(None, 5)
    if len(p) == 6 and 'libnccl' in os.path.basename(p[5].strip()):
        print(p[5].strip()); break" 2>/dev/null)
    [ -n "$c" ] && cands+=("$c")
  fi
  c=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  [ -n "$c" ] && cands+=("$c")
  [ -n "$CUDA_HOME" ] && cands+=("$CUDA_HOME/lib64/libnccl.so.2" "$CUDA_HOME/lib/libnccl.so.2")
  for c in "${cands[@]}"; do
    if [ -e "$c" ] && [ "$(realpath_of "$c")" != "$(realpath_of "$STRATA_LIB")" ]; then
      echo "$c"
      return
    fi
  done
}
SYSTEM_NCCL=$(find_system_nccl)

# ---- stages ----------------------------------------------------------------------------------------
stage_info() {
  local log=$OUT/info.txt
  {
    echo "== host: $(hostname), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
    grep -m1 "model name" /proc/cpuinfo
    cat /etc/os-release 2>/dev/null | grep PRETTY_NAME
    echo "== nvidia-smi"
    nvidia-smi 2>&1 || echo "(no nvidia-smi)"
    nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total,pci.bus_id --format=csv 2>&1
    echo "== nvcc: ${NVCC:-none}"
    [ -n "$NVCC" ] && "$NVCC" --version | tail -2
    echo "== system NCCL: ${SYSTEM_NCCL:-none found}"
    [ -n "$SYSTEM_NCCL" ] && echo "   version $(nccl_version_of "$SYSTEM_NCCL") ($(realpath_of "$SYSTEM_NCCL"))"
    ldconfig -p 2>/dev/null | grep -i libnccl
    for h in "$CUDA_HOME/include/nccl.h" /usr/include/nccl.h; do
      [ -f "$h" ] && echo "   $h: $(grep -E '#define NCCL_(MAJOR|MINOR|PATCH) ' "$h" | awk '{printf "%s ", $3}')"
    done
    echo "== PyTorch ($PY)"
    "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'available', torch.cuda.is_available(), 'devices', torch.cuda.device_count()); print('torch.cuda.nccl.version()', torch.cuda.nccl.version())" 2>&1 | tail -2
    echo "== tools"
    cmake --version 2>&1 | head -1
    ${CXX:-c++} --version 2>&1 | head -1
    mpirun --version 2>&1 | head -1
    "$PY" --version 2>&1
  } >"$log" 2>&1
  cat "$log"
  local gpu
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  NOTE="GPUs: $GPU_COUNT${gpu:+ ($gpu, sm_$GPU_ARCH)}; nvcc: $( [ -n "$NVCC" ] && "$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo none); system NCCL: $( [ -n "$SYSTEM_NCCL" ] && echo "$(nccl_version_of "$SYSTEM_NCCL") ($SYSTEM_NCCL)" || echo none); torch: $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
  return 0
}

missing_packages() {  # the Debian packages of scripts/install_deps.sh that are not installed
  command -v dpkg-query >/dev/null || return 0
  local p miss=""
  for p in build-essential cmake pkg-config libibverbs-dev libucx-dev libgtest-dev libgmock-dev \
           libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev libhwloc-dev openmpi-bin \
           libopenmpi-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || miss="$miss $p"
  done
  echo "$miss"
}

stage_build() {
  local log=$OUT/build.log attempt rc=1 t miss
  : >"$log"
  if [ -z "$NVCC" ]; then NOTE="nvcc not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"; return 1; fi
  miss=$(missing_packages)
  [ -n "$miss" ] && say "Debian packages missing (scripts/install_deps.sh would install them):$miss" | tee -a "$log"
  local base=(-DCMAKE_BUILD_TYPE=Release -DSTRATA_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC")
  [ -n "$GPU_ARCH" ] && base+=(-DCMAKE_CUDA_ARCHITECTURES="$GPU_ARCH")
  local -a attempts=(
    "-DSTRATA_ENABLE_UCX=ON -DSTRATA_ENABLE_IBVERBS=ON -DSTRATA_BUILD_TORCH=ON -DSTRATA_BUILD_TESTS=ON -DSTRATA_BUILD_PERF=ON -DSTRATA_BUILD_EXAMPLES=ON"
    "-DSTRATA_ENABLE_UCX=OFF -DSTRATA_ENABLE_IBVERBS=OFF -DSTRATA_BUILD_TORCH=OFF -DSTRATA_BUILD_TESTS=ON -DSTRATA_BUILD_PERF=ON -DSTRATA_BUILD_EXAMPLES=ON"
    "-DSTRATA_ENABLE_UCX=OFF -DSTRATA_ENABLE_IBVERBS=OFF -DSTRATA_BUILD_TORCH=OFF -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_PERF=ON -DSTRATA_BUILD_EXAMPLES=ON"
    "-DSTRATA_ENABLE_UCX=OFF -DSTRATA_ENABLE_IBVERBS=OFF -DSTRATA_BUILD_TORCH=OFF -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_PERF=OFF -DSTRATA_BUILD_EXAMPLES=OFF")
  local n=0 alog brc
  for attempt in "${attempts[@]}"; do
    n=$((n + 1))
    t=$(cap 300)
    [ "$t" -lt 30 ] && { NOTE="time budget exhausted"; return 1; }
    [ $n -gt 1 ] && rm -f "$BUILD/CMakeCache.txt"
    alog=$OUT/build.attempt$n.log
    say "configure (attempt $n: $attempt)"
    # shellcheck disable=SC2086
    if ! timeout "$t" cmake -S "$ROOT" -B "$BUILD" "${base[@]}" $attempt >"$alog" 2>&1; then
      cat "$alog" >>"$log"
      say "configure failed:"; grep -E "CMake Error|Could not find|not found" "$alog" | tail -5
      continue
    fi
    grep -E "^-- strata" "$alog" | tail -8
    t=$(cap 1200)
    say "build -j$JOBS (at most $t s)"
    timeout "$t" cmake --build "$BUILD" -j"$JOBS" >>"$alog" 2>&1
    brc=$?
    cat "$alog" >>"$log"
    if [ $brc -eq 0 ]; then rc=0; break; fi
    if [ $brc -eq 124 ]; then  # slow, not broken: other flags would not help
      NOTE="build timed out after $t s (log: build.log)"
      return 1
    fi
    say "build failed:"; grep -E "error|Error" "$alog" | tail -8
    # Only a failure around an optional dependency is worth another attempt with it off.
    if ! grep -E "error|Error|undefined reference" "$alog" | grep -qiE "ucx|ucp_|uct_|ucs_|ibverbs|infiniband|gtest|benchmark|torch|pybind|python"; then
      NOTE="build failed (compile or link error, log: build.log)"
      return 1
    fi
  done
  if [ $rc -ne 0 ]; then NOTE="configure/build failed in every attempt (log: build.log)${miss:+; missing:$miss}"; return 1; fi
  grep -q "^STRATA_ENABLE_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" || { NOTE="the CUDA path is off"; return 1; }
  [ -e "$STRATA_LIB" ] || { NOTE="no $STRATA_LIB"; return 1; }
  BUILD_OK=1
  grep -q "^STRATA_BUILD_TESTS:BOOL=ON" "$BUILD/CMakeCache.txt" && [ -x "$BUILD/tests/gpu/gpu_test" ] && TESTS_BUILT=1
  [ -x "$BUILD/perf/all_reduce_perf" ] && PERF_BUILT=1
  NOTE="attempt $n ($attempt); strata libnccl.so.2 reports $(nccl_version_of "$STRATA_LIB"); $(sed -n 's/^-- strata: CUDA path on (\(.*\))/\1/p' "$alog" | tail -1)"
  [ $TESTS_BUILT = 1 ] || NOTE="$NOTE; tests NOT built"
  [ $PERF_BUILT = 1 ] || NOTE="$NOTE; perf tools NOT built"
  return 0
}

stage_ctest() {
  [ "$BUILD_OK" = 1 ] || { NOTE="no build"; return 77; }
  [ "$TESTS_BUILT" = 1 ] || { NOTE="tests not built (see build)"; return 77; }
  [ "$GPU_COUNT" -gt 0 ] || { no_gpu; return 77; }
  local log=$OUT/ctest_gpu.log rc t
  t=$(cap 420)
  timeout -k 10 "$t" ctest --test-dir "$BUILD" -L gpu -LE trainer_gpu --output-on-failure --timeout 300 >"$log" 2>&1
  rc=$?
  grep -E "tests passed|\*\*\*(Failed|Timeout|Exception)|\((Failed|Timeout)\)" "$log" | tail -30
  local passed skipped total
  passed=$(grep -cE "Test +#[0-9]+: .* Passed" "$log" || true)
  skipped=$(grep -cE "Test +#[0-9]+: .*Skipped" "$log" || true)
  total=$(grep -cE "Test +#[0-9]+: " "$log" || true)
  NOTE="$passed passed, $skipped skipped of $total (log: ctest_gpu.log)"
  [ $rc -eq 124 ] && { NOTE="timed out after $t s; $NOTE"; return 1; }
  [ "$total" -gt 0 ] || { NOTE="no gpu test ran; $NOTE"; return 1; }
  [ $rc -eq 0 ] || return 1
  [ "$passed" -gt 0 ] || { NOTE="a GPU is present but every gpu test skipped; $NOTE"; return 1; }
  return 0
}

NT_WORK=$BUILD/nccl-tests-gpu
NT_MPI=0
find_tarball() {
  local t
  if [ -n "${NCCL_TESTS_TARBALL:-}" ]; then echo "$NCCL_TESTS_TARBALL"; return; fi
  for t in "$ROOT"/vendor-gpu/nccl-tests-*.tar.gz "$ROOT"/../shared/vendor/nccl-tests-*.tar.gz; do
    [ -f "$t" ] && { echo "$t"; return; }
  done
}
find_mpi_home() {  # a directory with include/mpi.h and lib/libmpi.so (what nccl-tests' MPI=1 wants)
  command -v mpicc >/dev/null && command -v mpirun >/dev/null || return 0
  local d
  for d in $(mpicc --showme:incdirs 2>/dev/null) $(mpicc -show 2>/dev/null | tr ' ' '\n' | sed -n 's/^-I//p'); do
    d=$(dirname "$d")
    while [ "$d" != / ]; do
      if [ -f "$d/include/mpi.h" ] && ls "$d"/lib*/libmpi.so >/dev/null 2>&1; then echo "$d"; return; fi
      d=$(dirname "$d")
    done
  done
}

stage_nccl_build() {
  [ "$BUILD_OK" = 1 ] || { NOTE="no build"; return 77; }
  local tarball header="" h mpi_home gencode arch log=$OUT/nccl-tests-build.log rc
  tarball=$(find_tarball)
  [ -n "$tarball" ] || { NOTE="no nccl-tests tarball (vendor-gpu/nccl-tests-*.tar.gz or NCCL_TESTS_TARBALL)"; return 77; }
  # NVIDIA's header: the CUDA toolkit's, else the system NCCL's (libnccl-dev, or beside the pip NCCL)
  for h in "$CUDA_HOME/include/nccl.h" /usr/include/nccl.h \
           ${SYSTEM_NCCL:+"$(dirname "$(realpath_of "$SYSTEM_NCCL")")/../include/nccl.h"}; do
    if [ -f "$h" ] && ! cmp -s "$h" "$ROOT/include/nccl/nccl.h"; then header=$h; break; fi
  done
  [ -n "$header" ] || { NOTE="no NVIDIA nccl.h (CUDA toolkit, /usr/include, system NCCL)"; return 77; }
  arch=${GPU_ARCH:-90}
  gencode="-gencode=arch=compute_$arch,code=sm_$arch"
  mpi_home=$(find_mpi_home)
  say "nccl-tests: $(basename "$tarball"), header $header, $gencode${mpi_home:+, MPI_HOME=$mpi_home}"
  timeout -k 10 "$(cap 420)" bash "$ROOT/tests/nccl_tests_link/check.sh" --tarball "$tarball" --nvcc "$NVCC" \
    --nccl-h "$header" --strata-header "$ROOT/include/nccl/nccl.h" --lib "$STRATA_LIB" --work "$NT_WORK" \
    --gencode "$gencode" --jobs "$JOBS" ${mpi_home:+--mpi-home "$mpi_home"} >"$log" 2>&1
  rc=$?
  grep -E "^(build:|building|checked|NOTE|PASSED|FAILED|SKIPPED)|ERROR" "$log"
  [ -n "$mpi_home" ] && [ $rc -eq 0 ] && NT_MPI=1
  if [ $rc -eq 77 ]; then NOTE=$(grep -m1 SKIPPED "$log"); return 77; fi
  NOTE="header $header; $(grep -m1 '^checked' "$log")"
  if [ -n "$mpi_home" ]; then NOTE="$NOTE; MPI=1 variant too ($mpi_home)"
  else NOTE="$NOTE; no MPI variant (no mpicc/mpirun with mpi.h): no process runs"; fi
  [ $rc -eq 0 ] || NOTE="check.sh exit $rc; $NOTE (log: nccl-tests-build.log)"
  return $rc
}

# check_nt LOG: "rows wrong oob concluded" of an nccl-tests output
check_nt() {
  awk '
    /^#/ && /#wrong/ { n = split(substr($0, 2), h, " "); np = 0; for (i = 1; i <= n; i++) if (h[i] == "#wrong") pos[++np] = i; next }
    /Out of bounds values/ { split($0, a, ":"); v = a[2] + 0; if (v != 0) oob += v; seen = 1; next }
    /Collective test concluded/ { done++ }
    /#wrong=[1-9]/ { wrong++ }
    /^ *[0-9]+ +[0-9]+ / && np > 0 {
      rows++
      for (k = 1; k <= np; k++) { w = $(pos[k]); if (w != "0" && w != "N/A") wrong += (w + 0 > 0 ? w + 0 : 1) }
    }
    END { printf "%d %d %d %d %d\n", rows, wrong, oob, seen, done }' "$1"
}

stage_nccl_tests() {
  [ "$GPU_COUNT" -gt 0 ] || { no_gpu; return 77; }
  [ -d "$NT_WORK/build" ] && ls "$NT_WORK"/build/*_perf >/dev/null 2>&1 || { NOTE="nccl-tests not built (see nccl-build)"; return 77; }
  local dir=$OUT/nccl-tests bins name b ld deadline runs=0 bad=0 notrun=0 failures="" notes_t=""
  mkdir -p "$dir"
  bins=$(sed -n 's/^BIN_FILES_LIST *:\?= *//p' "$NT_WORK/src/src/Makefile")
  ld="$(dirname "$STRATA_LIB"):$NT_WORK/home/cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  deadline=$(( $(date +%s) + $(cap 540) ))
  local mpirun_args=()
  if [ "$NT_MPI" = 1 ]; then
    if mpirun --version 2>&1 | grep -q "Open MPI"; then
      mpirun_args=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE
                   -x STRATA_TIMEOUT -x STRATA_LOG_LEVEL -x NCCL_MULTI_RANK_GPU_ENABLE)
    else
      say "mpirun is not Open MPI: process runs skipped"
    fi
  fi
  # one LABEL ARGS...: run an nccl-tests command (within the stage deadline) and check its output
  one() {
    local label=$1 log="$dir/$1.log" left res rows wrong oob seen concluded rc
    shift
    left=$((deadline - $(date +%s)))
    if [ "$left" -lt 20 ]; then notrun=$((notrun + 1)); return; fi
    [ "$left" -gt 180 ] && left=180
    runs=$((runs + 1))
    echo "\$ $*" >"$log"
    LD_LIBRARY_PATH="$ld" NCCL_TESTS_DEVICE=0 STRATA_LOG_LEVEL=info LD_PRELOAD="$preload" \
      timeout -k 10 "$left" "$@" >>"$log" 2>&1
    rc=$?
    read -r rows wrong oob seen concluded <<<"$(check_nt "$log")"
    res="rows $rows, #wrong $wrong, out of bounds $oob"
    if [ $rc -ne 0 ] || [ "$rows" -eq 0 ] || [ "$wrong" -ne 0 ] || [ "$oob" -ne 0 ] || [ "$seen" -eq 0 ] || [ "$concluded" -eq 0 ]; then
      bad=$((bad + 1)); failures="$failures $label"
      say "  FAIL $label: exit $rc, $res"; grep -vE "^ *[0-9]+ +[0-9]+ |^#|^strata .* INFO" "$log" | tail -4 | sed 's/^/      /'
    elif ! grep -q "communicator ready" "$log"; then
      bad=$((bad + 1)); failures="$failures $label"
      say "  FAIL $label: no strata log line: not run on strata's libnccl.so.2?"
    else
      say "  ok   $label: $res, $(sed -n 's/^# Avg bus bandwidth *: \([0-9.e+-]*\).*/avg busbw \1 GB\/s/p' "$log" | head -1)"
    fi
  }
  # Threads: nccl-tests gives thread i device NCCL_TESTS_DEVICE + i (and refuses more threads than
  # devices); the shim folds those ordinals onto GPU 0 (scripts/gpu_fold_devices.c). It needs the
  # binaries to call the dynamic CUDA runtime.
  local shim=$NT_WORK/libgpu_fold_devices.so preload="" threads=1
  if ! cc -shared -fPIC -O2 -o "$shim" "$ROOT/scripts/gpu_fold_devices.c" -ldl >"$dir/shim.log" 2>&1; then
    threads=0; notes_t="thread runs skipped: the device-folding shim did not build (nccl-tests/shim.log)"
  elif [ "$GPU_COUNT" -lt 4 ] && ! nm -D --undefined-only "$NT_WORK/build/all_reduce_perf" | grep -q " cudaSetDevice"; then
    threads=0; notes_t="thread runs skipped: nccl-tests links the CUDA runtime statically (no device folding)"
  fi
  if [ $threads = 1 ]; then
    preload=$shim
    for t in 2 4; do
      for name in $bins; do
        b=$NT_WORK/build/${name}_perf
        [ -x "$b" ] && one "${name}.t$t" "$b" -b 8 -e 64M -f 4 -g 1 -t "$t" -c 1
      done
    done
    preload=""
  fi
  if [ ${#mpirun_args[@]} -gt 0 ]; then
    for np in 2 4; do
      for name in $bins; do
        b=$NT_WORK/build-mpi/${name}_perf_mpi
        [ -x "$b" ] && one "${name}.np$np" "${mpirun_args[@]}" -n "$np" "$b" -b 8 -e 64M -f 4 -g 1 -t 1 -c 1
      done
    done
  fi
  if [ $threads = 1 ]; then
    preload=$shim
    for name in $bins; do
      b=$NT_WORK/build/${name}_perf
      [ -x "$b" ] && one "${name}.all" "$b" -b 8 -e 2M -f 8 -g 1 -t 2 -c 1 -d all -o all
    done
    preload=""
  fi
  [ "$(echo $failures | wc -w)" -gt 12 ] && failures="$(echo $failures | cut -d' ' -f1-12) ..."
  NOTE="$runs runs, $bad failed${failures:+ ($failures )}${notes_t:+; $notes_t}"
  [ "${#mpirun_args[@]}" -gt 0 ] || NOTE="$NOTE; process runs skipped: no MPI build (nccl-tests needs MPI=1 for processes)"
  [ "$notrun" -eq 0 ] || { NOTE="$NOTE; $notrun runs NOT run (stage time budget)"; return 1; }
  [ "$bad" -eq 0 ] && [ "$runs" -gt 0 ]
}

stage_trainer() {
  [ "$BUILD_OK" = 1 ] || { NOTE="no build"; return 77; }
  [ "$GPU_COUNT" -gt 0 ] || { no_gpu; return 77; }
  local train=$BUILD/examples/trainer/strata-train run=$BUILD/tools/strata-run dir=$OUT/trainer rc t bad=0
  [ -x "$train" ] && [ -x "$run" ] || { NOTE="strata-train or strata-run not built"; return 77; }
  mkdir -p "$dir"
  t=$(cap 420)
  say "ctest -L trainer_gpu (parity layouts on the GPU vs the CPU's losses)"
  timeout -k 10 "$t" ctest --test-dir "$BUILD" -L trainer_gpu --output-on-failure --timeout 300 >"$dir/ctest.log" 2>&1
  rc=$?
  grep -E "tests passed|\*\*\*(Failed|Timeout)|\((Failed|Timeout)\)|Skipped" "$dir/ctest.log" | tail -12
  local passed total
  passed=$(grep -cE "Test +#[0-9]+: .* Passed" "$dir/ctest.log" || true)
  total=$(grep -cE "Test +#[0-9]+: " "$dir/ctest.log" || true)
  NOTE="parity $passed of $total passed"
  [ $rc -eq 0 ] && [ "$passed" -gt 0 ] || bad=1
  # max rel diff per layout, for the record
  grep -hE "^[a-z0-9_]+ +[0-9]+ +dp" "$dir/ctest.log" | awk '{print $1, $(NF-2)}' >"$dir/parity_diffs.txt"
  local m=(--layers 4 --hidden 256 --heads 8 --seq 128 --vocab 256 --batch 32 --data text --steps 12)
  : >"$dir/tokens.txt"
  for dev in cuda cpu; do
    for lay in "1" "8 --dp 2 --tp 2 --pp 2 --microbatches 4"; do
      set -- $lay
      local n=$1; shift
      t=$(cap 150)
      [ "$t" -gt 20 ] || { NOTE="$NOTE; tokens/s runs cut (budget)"; break 2; }
      timeout -k 10 "$t" "$run" -n "$n" -- "$train" --device "$dev" "${m[@]}" "$@" >"$dir/run.$dev.$n.log" 2>&1
      rc=$?
      local tok
      tok=$(sed -n 's/^mean of steps.* \([0-9]*\) tok\/s.*/\1/p' "$dir/run.$dev.$n.log" | tail -1)
      echo "$dev $n ranks ${*:-one rank}: ${tok:-?} tok/s (exit $rc)" | tee -a "$dir/tokens.txt"
      [ "$dev" = cuda ] && [ $rc -ne 0 ] && bad=1
      NOTE="$NOTE; $dev n=$n ${tok:-?} tok/s"
    done
  done
  [ "$bad" -eq 0 ]
}

stage_torch() {
  [ "$HAVE_TORCH" = 1 ] || { NOTE="PyTorch not importable by $PY"; return 77; }
  [ "$GPU_COUNT" -gt 0 ] || { no_gpu; return 77; }
  [ "$BUILD_OK" = 1 ] || { NOTE="no build"; return 77; }
  local dir=$OUT/torch n rc ref notes="" bad=0 lib tlib miss script=$ROOT/scripts/gpu_torch_check.py deadline
  mkdir -p "$dir"
  lib=$(realpath_of "$STRATA_LIB")
  # PyTorch must import NCCL dynamically for a preloaded libnccl.so.2 to stand in for it.
  tlib=$("$PY" -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))" 2>/dev/null)
  if [ ! -e "$tlib/libtorch_cuda.so" ]; then NOTE="PyTorch without CUDA (no $tlib/libtorch_cuda.so)"; return 77; fi
  if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
    NOTE="torch.cuda.is_available() is False"; return 77
  fi
  local imports
  imports=$(nm -D --undefined-only "$tlib"/libtorch_cuda.so 2>/dev/null | awk '$NF ~ /^nccl/ {sub(/@.*/, "", $NF); print $NF}' | sort -u)
  if [ -z "$imports" ]; then
    NOTE="PyTorch's libtorch_cuda.so imports no nccl symbol (NCCL linked statically?): LD_PRELOAD cannot put strata under it"
    return 77
  fi
  miss=$(comm -23 <(echo "$imports") <(nm -D --defined-only "$lib" | awk '{sub(/@.*/, "", $NF); print $NF}' | sort -u) | tr '\n' ' ')
  echo "PyTorch imports $(echo "$imports" | wc -l) nccl symbols; not exported by strata: ${miss:-none}" | tee "$dir/symbols.txt"
  echo "$imports" >>"$dir/symbols.txt"
  deadline=$(( $(date +%s) + $(cap 420) ))
  for n in 2 4; do
    local left=$((deadline - $(date +%s)))
    [ "$left" -gt 40 ] || { notes="$notes; n=$n not run (budget)"; bad=$((bad + 1)); continue; }
    [ "$left" -gt 200 ] && left=200
    say "torch, $n ranks on cuda:0, strata LD_PRELOADed"
    LD_PRELOAD="$lib" STRATA_LOG_LEVEL=info timeout -k 10 "$left" "$PY" "$script" --world "$n" --timeout $((left - 20)) \
      --losses "$dir/losses.strata.$n.txt" --expect-nccl "$lib" >"$dir/strata.$n.log" 2>&1
    rc=$?
    grep -E "torch.cuda.nccl|OK \(|FAIL|EXCEPTION|exit codes|TIMEOUT" "$dir/strata.$n.log" | grep -v "^\[[1-9]\] OK" | head -12
    if [ $rc -ne 0 ]; then
      bad=$((bad + 1)); notes="$notes; strata n=$n: exit $rc"
    elif ! grep -q "communicator ready" "$dir/strata.$n.log"; then
      bad=$((bad + 1)); notes="$notes; strata n=$n: no strata log line"
    fi
    left=$((deadline - $(date +%s)))
    [ "$left" -gt 40 ] || { notes="$notes; n=$n reference not run (budget)"; bad=$((bad + 1)); continue; }
    [ "$left" -gt 200 ] && left=200
    say "torch, $n ranks on cuda:0, system NCCL (${SYSTEM_NCCL:-the one PyTorch loads})"
    env -u LD_PRELOAD timeout -k 10 "$left" "$PY" "$script" --world "$n" --timeout $((left - 20)) \
      --losses "$dir/losses.nccl.$n.txt" --forbid-nccl "$lib" >"$dir/nccl.$n.log" 2>&1
    rc=$?
    grep -E "torch.cuda.nccl|FAIL|exit codes|TIMEOUT|Duplicate" "$dir/nccl.$n.log" | head -6
    ref=$dir/losses.nccl.$n.txt
    if [ $rc -eq 3 ]; then
      notes="$notes; n=$n: system NCCL refuses $n ranks on one GPU, reference gloo"
      left=$((deadline - $(date +%s)))
      [ "$left" -gt 200 ] && left=200
      env -u LD_PRELOAD timeout -k 10 "$left" "$PY" "$script" --world "$n" --backend gloo --ddp-only \
        --timeout $((left - 20)) --losses "$dir/losses.gloo.$n.txt" >"$dir/gloo.$n.log" 2>&1
      rc=$?
      ref=$dir/losses.gloo.$n.txt
      [ $rc -eq 0 ] || { notes="$notes; gloo reference n=$n: exit $rc"; ref=""; }
    elif [ $rc -ne 0 ]; then
      notes="$notes; system NCCL n=$n: exit $rc (the reference itself failed)"; ref=""
    fi
    if [ -n "$ref" ] && [ -f "$dir/losses.strata.$n.txt" ] && [ -f "$ref" ]; then
      if "$PY" "$script" --compare "$dir/losses.strata.$n.txt" "$ref" >"$dir/compare.$n.txt" 2>&1; then
        notes="$notes; n=$n losses: $(sed 's/^compare: //' "$dir/compare.$n.txt" | cut -c1-90)"
      else
        bad=$((bad + 1)); notes="$notes; n=$n losses DIFFER: $(head -1 "$dir/compare.$n.txt")"
      fi
      cat "$dir/compare.$n.txt"
    else
      bad=$((bad + 1)); notes="$notes; n=$n: no loss comparison"
    fi
  done
  NOTE="${notes#; }${miss:+; torch imports not in strata: $miss}"
  [ "$bad" -eq 0 ]
}

stage_perf() {
  [ "$GPU_COUNT" -gt 0 ] || { no_gpu; return 77; }
  [ "$BUILD_OK" = 1 ] && [ "$PERF_BUILT" = 1 ] || { NOTE="perf tools not built"; return 77; }
  local dir=$OUT/perf n plot=() nccl=() impls rc bad=0 notes="" t deadline
  mkdir -p "$dir"
  "$PY" -c "import matplotlib" >/dev/null 2>&1 && plot=(--plot)
  impls=strata
  if [ -n "$SYSTEM_NCCL" ]; then impls=strata,nccl; nccl=(--nccl-lib "$SYSTEM_NCCL"); fi
  deadline=$(( $(date +%s) + $(cap 480) ))
  for n in 2 4; do
    t=$((deadline - $(date +%s)))
    [ "$t" -gt 30 ] || { notes="$notes; n=$n not run (budget)"; bad=$((bad + 1)); continue; }
    say "perf/compare --memory device -n $n ($impls)"
    timeout -k 10 "$t" "$PY" "$ROOT/perf/compare" --memory device -n "$n" -b 8 -e 1G -f 2 --iters 10 --warmup 3 \
      --colls all_reduce,reduce_scatter,all_gather,alltoall,broadcast --impls "$impls" "${nccl[@]}" \
      --build-dir "$BUILD" --timeout 150 --save-dir "$dir/n$n" --json "$dir/n$n.json" \
      ${plot:+--plot "$dir/n$n.png"} >"$dir/compare.n$n.txt" 2>"$dir/compare.n$n.err"
    rc=$?
    tail -n 5 "$dir/compare.n$n.err"
    # strata's runs must all have succeeded with rows and no wrong element; NCCL's are the reference
    local verdict
    verdict=$("$PY" - "$dir/n$n.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL no json ({e})"); sys.exit()
runs = [r for r in d["runs"] if r["impl"] == "strata"]
bad = [f"{r['coll']} exit {r['returncode']} rows {r['rows']}" for r in runs if r["returncode"] != 0 or r["rows"] == 0]
bad += [p for p in d["problems"] if p.startswith("strata") and "wrong" in p]
nccl = [r for r in d["runs"] if r["impl"] == "nccl"]
nfail = sum(1 for r in nccl if r["returncode"] != 0 or r["rows"] == 0)
print(("FAIL " + "; ".join(bad[:4])) if bad or not runs else
      f"ok {len(runs)} strata runs" + (f", NCCL: {len(nccl) - nfail} of {len(nccl)} ran" if nccl else ""))
EOF
)
    say "  n=$n: $verdict (exit $rc)"
    notes="$notes; n=$n: $verdict"
    case "$verdict" in ok*) ;; *) bad=$((bad + 1)) ;; esac
  done
  NOTE="${notes#; } (tables: perf/compare.n*.txt)"
  [ "$bad" -eq 0 ]
}

# ---- run -------------------------------------------------------------------------------------------
say "strata GPU validation: $ROOT -> $OUT (build $BUILD, -j$JOBS, budget ${BUDGET}s, GPUs $GPU_COUNT)"
write_summary
run_stage info stage_info
run_stage build stage_build
run_stage ctest stage_ctest
run_stage trainer stage_trainer
run_stage nccl-build stage_nccl_build
run_stage nccl-tests stage_nccl_tests
run_stage torch stage_torch
run_stage perf stage_perf
echo
cat "$SUMMARY"
if [ "$FAILED" -gt 0 ]; then
  echo "overall: FAIL ($FAILED stage(s) failed)" | tee -a "$SUMMARY"
  exit 1
fi
if [ -n "$SKIPPED" ]; then
  echo "overall: PASS of what ran; SKIPPED (not validated):$SKIPPED" | tee -a "$SUMMARY"
  [ "${GPU_VALIDATE_STRICT:-0}" = 1 ] && exit 3
  exit 0
fi
echo "overall: PASS" | tee -a "$SUMMARY"
exit 0
