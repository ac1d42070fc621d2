#!/usr/bin/env bash
# check_install.sh PREFIX: checks an installed strata (cmake --install, or the Debian packages at
# PREFIX=/usr) as a user outside the tree meets it. Builds examples/consumer both ways, with
# find_package(strata) and with pkg-config, each against PREFIX only, and runs both programs (native
# API and NCCL ABI) as 2 ranks under PREFIX/bin/strata-run; runs the installed strata_all_reduce_perf;
# imports the installed strata_torch and runs a 2-process all-reduce on it (when it is installed).
# Fails on the first thing that does not work. Needs cmake, make, a C compiler and pkg-config.
set -euo pipefail
prefix="$(cd "${1:?usage: $0 PREFIX}" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)/examples/consumer"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run="$prefix/bin/strata-run"
[ -x "$run" ] || { echo "check_install: $run not installed" >&2; exit 1; }
say() { echo "check_install: $*"; }

# Nothing of the build tree may leak in: only PREFIX's files are searched.
libdir=$(dirname "$(find "$prefix" -name 'libstrata.so.0' -print -quit)")
say "libstrata.so.0 in $libdir"

say "find_package(strata) build"
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; exit 1; }
grep -- '-- strata ' "$work/cmake.log"
cmake --build "$work/cmake" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

# The package's version check: 0.1 is found, a newer minor version or major version is refused.
mkdir -p "$work/version"
for want in 0.2 1.0; do
  printf 'cmake_minimum_required(VERSION 3.16)\nproject(v LANGUAGES C)\nfind_package(strata %s CONFIG REQUIRED)\n' "$want" \
    >"$work/version/CMakeLists.txt"
  if cmake -S "$work/version" -B "$work/version/b$want" -DCMAKE_PREFIX_PATH="$prefix" >"$work/version.log" 2>&1; then
    echo "check_install: find_package(strata $want) accepted version 0.1" >&2; exit 1
  fi
  grep -q 'considered but not accepted' "$work/version.log" || { cat "$work/version.log"; exit 1; }
done
say "find_package(strata 0.2) and (strata 1.0) refused, as they should be"

say "pkg-config build"
pcdir=$(dirname "$(find "$prefix" -name strata.pc -print -quit)")
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
say "pkg-config --cflags --libs strata: $(pkg-config --cflags --libs strata)"
say "pkg-config --cflags --libs strata-nccl: $(pkg-config --cflags --libs strata-nccl)"
case " $(pkg-config --cflags strata strata-nccl) " in
  *" -I/usr/include "*) echo "check_install: pkg-config puts the system include folder on -I" >&2; exit 1 ;;
esac
mkdir -p "$work/make"
make -s -C "$src" OUT="$work/make" >"$work/make.log" 2>&1 || { cat "$work/make.log"; exit 1; }

for build in cmake make; do
  for prog in allreduce_native allreduce_nccl; do
    say "$build/$prog on 2 ranks"
    # The NCCL program must load strata's libnccl.so.2 from PREFIX, found through its rpath.
    if [ "$prog" = allreduce_nccl ]; then
      # (ldd's output taken whole first: grep -q would stop reading early, and pipefail would
      # count ldd's broken pipe as a failure.)
      deps=$(ldd "$work/$build/$prog")
      grep -q "libnccl.so.2 => $prefix/" <<<"$deps" ||
        { echo "$deps"; echo "check_install: $prog does not load $prefix's libnccl.so.2" >&2; exit 1; }
    fi
    out=$(env -u LD_LIBRARY_PATH "$run" -n 2 -- "$work/$build/$prog")
    echo "$out"
    [ "$(grep -c ' 0 wrong' <<<"$out")" -eq 2 ] || { echo "check_install: $build/$prog: not every rank exact" >&2; exit 1; }
  done
done

say "strata_all_reduce_perf on 2 ranks"
out=$("$run" -n 2 -- "$prefix/bin/strata_all_reduce_perf" -b 1K -e 1M -f 4 -c 1)
echo "$out" | tail -4
grep -q '# Out of bounds values : 0 OK' <<<"$out" || { echo "check_install: perf tool reported wrong values" >&2; exit 1; }

pkgdir=$(find "$prefix" -type d -name strata_torch -path '*-packages/*' -print -quit)
if [ -n "$pkgdir" ]; then
  say "strata_torch from $pkgdir"
  pypath=""
  # Under /usr the interpreter finds it by itself; elsewhere PYTHONPATH points at the prefix.
  if [ "$prefix" != /usr ]; then pypath=$(dirname "$pkgdir"); fi
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$pypath" OMP_NUM_THREADS=1 python3 -c \
    "import strata_torch, sys; assert strata_torch.__file__.startswith('$pkgdir'), strata_torch.__file__" ||
    { echo "check_install: strata_torch imported from elsewhere" >&2; exit 1; }
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$pypath" OMP_NUM_THREADS=1 python3 "$src/torch_allreduce.py"
else
  say "strata_torch not installed (PyTorch backend not built): skipped"
fi
say "OK"
