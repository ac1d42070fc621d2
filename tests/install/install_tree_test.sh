#!/usr/bin/env bash
# install_tree_test.sh BUILD_DIR: CTest label `install`. Installs BUILD_DIR with `cmake --install`
# into a temporary prefix (no root, nothing outside it) and checks it as a user meets it:
# scripts/check_install.sh (examples/consumer built with find_package and with pkg-config against
# the prefix and run under the installed strata-run, the installed perf tool, strata_torch).
set -euo pipefail
build="${1:?usage: $0 BUILD_DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >"$prefix.install.log" 2>&1 || { cat "$prefix.install.log"; rm -f "$prefix.install.log"; exit 1; }
rm -f "$prefix.install.log"
# No installed binary may find its libraries in the build tree (rpaths are rewritten on install).
bad=0
while IFS= read -r -d '' f; do
  if file_rpath=$(readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH'); then
    if grep -q "$(cd "$build" && pwd)" <<<"$file_rpath"; then echo "install_tree_test: $f: $file_rpath" >&2; bad=1; fi
  fi
done < <(find "$prefix" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
[ "$bad" -eq 0 ] || exit 1
"$root/scripts/check_install.sh" "$prefix"
