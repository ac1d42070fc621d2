#!/usr/bin/env bash
# nccl_tests_link (CTest, label abi): builds NVIDIA's nccl-tests, unmodified, against NVIDIA's nccl.h
# and strata's libnccl.so.2, then checks, for every binary its Makefile builds, that
#   - it names libnccl.so.2 in DT_NEEDED,
#   - every nccl*/pnccl* symbol it imports is defined (exported) by strata's libnccl.so.2 (nm -D);
#     of its weak imports, only those in WEAK_ALLOWED (NCCL's device API) may be missing,
#   - with strata's directory on LD_LIBRARY_PATH the loader picks strata's library (ldd's path) and
#     `ldd -r` reports no undefined symbol,
#   - it starts with LD_BIND_NOW=1 (every symbol bound before main) and prints its usage (-h; that
#     path calls ncclGetVersion and nothing of CUDA, so no GPU is needed).
# The link itself is against strata's library only (NVIDIA's libnccl.so, beside nvcc in the toolkit,
# is kept off the link path), so a missing export already fails the link and is reported by name.
#
# Needs the nccl-tests tarball, nvcc and NVIDIA's nccl.h; without one of them it prints what is
# missing and exits 77, which CTest reports as Skipped. The build lives under --work (in the build
# tree) and is reused: the tarball is extracted again only when it, the nvcc version, the header or
# the gencode change; binaries are relinked when strata's library is newer than them.
#
#   check.sh --tarball T --nvcc NVCC --nccl-h NVIDIA_NCCL_H --lib STRATA_LIBNCCL --work DIR
#            [--strata-header include/nccl/nccl.h] [--gencode "-gencode=..."] [--jobs 2]
#            [--mpi-home DIR]   also the MPI=1 variant (DIR/include/mpi.h, DIR/lib/libmpi.so), built
#                               into WORK/build-mpi as <coll>_perf_mpi
# scripts/gpu_validate.sh runs the binaries from WORK/build and WORK/build-mpi, with WORK/home/cudalib
# (links to the CUDA runtime only) after strata's directory on LD_LIBRARY_PATH.
set -uo pipefail
export LC_ALL=C

SKIP=77
tarball="" nvcc="" nccl_h="" lib="" work="" strata_header="" jobs=2 mpi_home=""
gencode="-gencode=arch=compute_80,code=sm_80"
while [ $# -gt 0 ]; do
  case "$1" in
    --tarball) tarball="$2"; shift 2 ;;
    --nvcc) nvcc="$2"; shift 2 ;;
    --nccl-h) nccl_h="$2"; shift 2 ;;
    --lib) lib="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --strata-header) strata_header="$2"; shift 2 ;;
    --gencode) gencode="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --mpi-home) mpi_home="$2"; shift 2 ;;
    *) echo "check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

skip() { echo "SKIPPED: nccl_tests_link: $*"; exit "$SKIP"; }
fail() { echo "FAILED: nccl_tests_link: $*"; exit 1; }

[ -n "$lib" ] && [ -e "$lib" ] || fail "strata's libnccl.so.2 not found at '$lib' (build the nccl target first)"
[ -n "$work" ] || fail "--work not given"
# What is missing on this machine: reported as a skip, never as a pass.
[ -n "$tarball" ] && [ -f "$tarball" ] ||
  skip "nccl-tests tarball not found at '${tarball}' (configure with -DSTRATA_NCCL_TESTS_TARBALL=/path/to/nccl-tests-2.19.6.tar.gz)"
[ -n "$nvcc" ] && [ -x "$nvcc" ] || skip "nvcc not found ('${nvcc}'; configure with -DSTRATA_NVCC=/path/to/nvcc)"
[ -n "$nccl_h" ] && [ -f "$nccl_h" ] ||
  skip "NVIDIA's nccl.h not found at '${nccl_h}' (configure with -DSTRATA_NVIDIA_NCCL_INCLUDE=/path/to/nccl.h)"
for tool in make nm readelf ldd tar sha256sum; do
  command -v "$tool" >/dev/null || skip "'$tool' not found"
done
# The header must be NVIDIA's, not strata's include/nccl/nccl.h.
if [ -n "$strata_header" ] && [ -f "$strata_header" ] && cmp -s "$nccl_h" "$strata_header"; then
  fail "$nccl_h is strata's own nccl.h; point STRATA_NVIDIA_NCCL_INCLUDE at NVIDIA's"
fi
grep -q "NVIDIA CORPORATION" "$nccl_h" || fail "$nccl_h does not look like NVIDIA's nccl.h"

cuda_home=$(cd "$(dirname "$nvcc")/.." && pwd)
lib=$(readlink -f "$lib")
libdir=$(dirname "$lib")
[ -e "$libdir/libnccl.so.2" ] || fail "no libnccl.so.2 (the soname link) beside $lib"
mkdir -p "$work" && work=$(cd "$work" && pwd)
t0=$(date +%s)

# ---- extract (again only when an input changed) -------------------------------------------------
nvcc_version=$("$nvcc" --version | tail -1)
stamp="$(sha256sum "$tarball" | cut -d' ' -f1) $(sha256sum "$nccl_h" | cut -d' ' -f1) $gencode $nvcc_version"
if [ "$(cat "$work/stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "extracting $tarball into $work/src"
  rm -rf "$work/src" "$work/build" "$work/stamp"
  mkdir -p "$work/src"
  tar -xzf "$tarball" -C "$work/src" --strip-components=1 || fail "cannot extract $tarball"
  echo "$stamp" >"$work/stamp"
else
  echo "reusing the nccl-tests build in $work (inputs unchanged)"
fi
[ -f "$work/src/src/Makefile" ] || fail "$tarball has no src/Makefile"

# ---- NCCL_HOME: NVIDIA's header, strata's library; CUDA_LIB: the CUDA runtime only ---------------
# nccl-tests links "-L$CUDA_LIB -lcudart -lrt -L$NCCL_HOME/lib -lnccl"; the toolkit's lib directory
# may hold NVIDIA's libnccl.so (it does in pip-style toolkits), so CUDA_LIB is a directory of links
# to the runtime alone and -lnccl can only find strata's.
home="$work/home"
rm -rf "$home" && mkdir -p "$home/include" "$home/lib" "$home/cudalib"
cp "$nccl_h" "$home/include/nccl.h"
ln -s "$lib" "$home/lib/libnccl.so"
ln -s "$lib" "$home/lib/libnccl.so.2"
cudart_dir=""
for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home"/targets/*/lib; do
  if ls "$d"/libcudart.so* >/dev/null 2>&1 || [ -f "$d/libcudart_static.a" ]; then cudart_dir=$d; break; fi
done
[ -n "$cudart_dir" ] || skip "no CUDA runtime (libcudart) under $cuda_home"
cudartlib=cudart
for f in "$cudart_dir"/libcudart.so* "$cudart_dir"/libcudart_static.a "$cudart_dir"/libculibos.a; do
  [ -e "$f" ] && ln -s "$f" "$home/cudalib/"
done
[ -e "$home/cudalib/libcudart.so" ] || cudartlib=cudart_static

# Relink (objects kept) when strata's library changed since the last link.
for b in "$work"/build/*_perf "$work"/build-mpi/*_perf_mpi; do
  [ -e "$b" ] && [ "$lib" -nt "$b" ] && rm -f "$b"
done

# ---- build ---------------------------------------------------------------------------------------
# build VARIANT_DIR LOG [make variables...]
build() {
  local dir=$1 log=$2 tb
  shift 2
  tb=$(date +%s)
  if ! make -C "$work/src" -j"$jobs" BUILDDIR="$dir" CUDA_HOME="$cuda_home" NVCC="$nvcc" \
      NCCL_HOME="$home" CUDA_LIB="$home/cudalib" CUDARTLIB="$cudartlib" NVCC_GENCODE="$gencode" "$@" \
      >"$log" 2>&1; then
    tail -40 "$log"
    missing=$(grep -o "undefined reference to \`p\?nccl[A-Za-z0-9_]*" "$log" | sed 's/.*`//' | sort -u)
    [ -n "$missing" ] && echo "symbols strata's libnccl.so.2 does not export:" $missing
    fail "the nccl-tests build failed (log: $log)"
  fi
  echo "build: $(( $(date +%s) - tb )) s"
}
echo "building nccl-tests ($gencode, -j$jobs) against $nccl_h and $lib"
build "$work/build" "$work/make.log"
variants="$work/build:"
if [ -n "$mpi_home" ]; then
  [ -f "$mpi_home/include/mpi.h" ] || fail "no $mpi_home/include/mpi.h (--mpi-home)"
  echo "building the MPI=1 variant (MPI_HOME=$mpi_home)"
  build "$work/build-mpi" "$work/make-mpi.log" MPI=1 MPI_HOME="$mpi_home" NAME_SUFFIX=_mpi
  variants="$variants $work/build-mpi:_mpi"
fi

# ---- checks --------------------------------------------------------------------------------------
bins=$(sed -n 's/^BIN_FILES_LIST *:\?= *//p' "$work/src/src/Makefile")
[ -n "$bins" ] || fail "no BIN_FILES_LIST in nccl-tests' src/Makefile"
defined=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
ldpath="$libdir:$home/cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
errors=0 nbins=0 all_syms="" weak_absent=""
# Weak imports strata may lack: NCCL 2.28's device API (ncclDevComm*), which nccl-tests only calls
# with -D/--device_implementation > 0; without them that option would call NULL.
WEAK_ALLOWED="ncclDevCommCreate ncclDevCommDestroy"
err() { echo "  ERROR: $*"; errors=$((errors + 1)); }
for variant in $variants; do
for name in $bins; do
  b="${variant%%:*}/${name}_perf${variant#*:}"
  echo "$(basename "$b"):"
  if [ ! -x "$b" ]; then err "not built"; continue; fi
  nbins=$((nbins + 1))
  needed=$(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  case " $needed" in *" libnccl.so.2 "*) ;; *) err "DT_NEEDED lacks libnccl.so.2: $needed" ;; esac
  runpath=$(readelf -d "$b" | grep -E '\((RPATH|RUNPATH)\)' || true)
  [ -z "$runpath" ] || echo "  note: $runpath"
  imports=$(nm -D --undefined-only "$b" | awk '$NF ~ /^p?nccl/ {sub(/@.*/, "", $NF); print $(NF-1), $NF}')
  syms=$(echo "$imports" | awk 'NF == 2 {print $2}' | sort -u)
  strong=$(echo "$imports" | awk '$1 == "U" {print $2}' | sort -u)
  weak=$(echo "$imports" | awk '$1 == "w" || $1 == "v" {print $2}' | sort -u)
  [ -n "$strong" ] || err "imports no nccl symbol (linked statically?)"
  miss=$(comm -23 <(echo "$strong") <(echo "$defined") | grep . || true)
  [ -z "$miss" ] || err "not exported by strata's libnccl.so.2: $(echo $miss)"
  # Weak imports may be absent (the program then sees NULL): only the allowed ones are.
  wmiss=$(comm -23 <(echo "$weak") <(echo "$defined") | grep . || true)
  for s in $wmiss; do
    case " $WEAK_ALLOWED " in
      *" $s "*) weak_absent="$weak_absent $s" ;;
      *) err "weak import $s not exported by strata's libnccl.so.2 (not in the allowed list)" ;;
    esac
  done
  all_syms="$all_syms $syms"
  ldd_out=$(LD_LIBRARY_PATH="$ldpath" ldd -r "$b" 2>&1)
  resolved=$(echo "$ldd_out" | sed -n 's/^[[:space:]]*libnccl\.so\.2 => \([^ ]*\) .*/\1/p')
  if [ -z "$resolved" ] || [ "$(readlink -f "$resolved")" != "$lib" ]; then
    err "the loader picks '${resolved:-nothing}' for libnccl.so.2, not $lib"
  fi
  if echo "$ldd_out" | grep -E "undefined symbol|not found" >/dev/null; then
    err "ldd -r: $(echo "$ldd_out" | grep -E "undefined symbol|not found" | tr '\n' ';')"
  fi
  run_out=$(LD_LIBRARY_PATH="$ldpath" LD_BIND_NOW=1 timeout 60 "$b" -h 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! echo "$run_out" | grep -q "USAGE"; then
    err "LD_BIND_NOW=1 $(basename "$b") -h: exit $rc: $(echo "$run_out" | tail -3 | tr '\n' ';')"
  fi
  echo "  NEEDED: $needed"
  echo "  libnccl.so.2 => $resolved"
  echo "  $(echo "$strong" | grep -c .) nccl imports: $(echo $strong)"
  [ -z "$weak" ] || echo "  weak: $(echo $weak)${wmiss:+ (not exported by strata: $(echo $wmiss))}"
done
done

distinct=$(echo $all_syms | tr ' ' '\n' | sort -u | grep -c . || true)
echo "checked $nbins binaries, $distinct distinct nccl symbols, in $(( $(date +%s) - t0 )) s"
weak_absent=$(echo $weak_absent | tr ' ' '\n' | sort -u | tr '\n' ' ')
[ -z "$weak_absent" ] || echo "NOTE: weak imports strata does not export (allowed): $weak_absent"
[ "$errors" -eq 0 ] || fail "$errors problem(s) above"
[ "$nbins" -gt 0 ] || fail "no binary checked"
echo "PASSED: every nccl-tests binary resolves its NCCL symbols from $lib"
