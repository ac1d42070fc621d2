#!/usr/bin/env bash
# package.sh: the Debian packages of strata (scripts/cmake/packaging.cmake) from ./build, made by
# CPack into build/packages/: libstrata0, libstrata-dev, strata-tools and python3-strata-torch.
# Builds what they hold first (scripts/build.sh when build/ is not there yet). Install them with
#   apt-get install ./build/packages/*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/CMakeCache.txt ]; then scripts/build.sh; else cmake --build build -j"$(nproc)"; fi
rm -rf build/packages
(cd build && cpack -G DEB >cpack.log 2>&1) || { cat build/cpack.log >&2; exit 1; }
for deb in build/packages/*.deb; do
  echo "package.sh: $deb"
  dpkg-deb --field "$deb" Package Version Depends | sed 's/^/  /'
done
