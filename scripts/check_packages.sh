#!/usr/bin/env bash
# check_packages.sh [DEB...]: on a clean Debian machine or root (as root), installs strata's Debian
# packages (default: build/packages/*.deb) with apt, which must find every dependency they declare,
# checks the installed files as a user meets them (scripts/check_install.sh /usr), then purges the
# packages and checks that nothing of strata's is left. Installs the consumer's toolchain first
# (cmake, a C compiler, make, pkg-config), as a user of libstrata-dev has.
set -euo pipefail
cd "$(dirname "$0")/.."
debs=("$@")
if [ ${#debs[@]} -eq 0 ]; then debs=(build/packages/*.deb); fi
[ -f "${debs[0]}" ] || { echo "check_packages: no .deb files (scripts/package.sh makes them)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
say() { echo "check_packages: $*"; }

ours=()
for d in "${debs[@]}"; do ours+=("$(dpkg-deb --field "$d" Package)"); done
say "packages: ${ours[*]}"
for p in "${ours[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    echo "check_packages: $p is installed already; run on a clean machine" >&2; exit 1
  fi
done

apt-get update -qq
apt-get install -y -qq --no-install-recommends build-essential cmake pkg-config >/dev/null
paths=()
for d in "${debs[@]}"; do paths+=("$(realpath "$d")"); done
apt-get install -y -qq --no-install-recommends "${paths[@]}" >/dev/null
for p in "${ours[@]}"; do say "installed $p $(dpkg-query -W -f='${Version}' "$p")"; done

# Maintainer scripts: none but the shared library's ldconfig calls (CPack's, as debhelper's).
boilerplate='^(#!/bin/sh|set -e|if \[ "\$1" = "(configure|remove)" \]; then|[[:space:]]*ldconfig|fi|)$'
for p in "${ours[@]}"; do
  for s in preinst postinst prerm postrm; do
    f="/var/lib/dpkg/info/$p.$s"
    [ -e "$f" ] || continue
    extra=$(grep -vE "$boilerplate" "$f" || true)
    if [ -n "$extra" ]; then echo "check_packages: $p's $s does more than ldconfig: $extra" >&2; exit 1; fi
  done
done

scripts/check_install.sh /usr

# Purge: every file and folder the packages brought goes with them.
owned=$(for p in "${ours[@]}"; do dpkg -L "$p"; done | sort -u)
apt-get purge -y -qq "${ours[@]}" >/dev/null
left=()
while read -r f; do
  case "$f" in /usr/lib/*/strata*|/usr/lib/strata*|/usr/include/strata*|/usr/share/strata*|/usr/lib/cmake/strata*|*/strata_torch*|/usr/bin/strata*|/usr/share/doc/*strata*)
    if [ -e "$f" ]; then left+=("$f"); fi ;;
  esac
done <<<"$owned"
if [ ${#left[@]} -gt 0 ]; then printf 'check_packages: left after purge: %s\n' "${left[@]}" >&2; exit 1; fi
say "purged: nothing of strata left"
say "OK"
