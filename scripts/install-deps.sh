#!/bin/sh
# Installs the Debian packages kerntune needs to build and test, and nothing else.
# Idempotent: a package that is already installed is skipped, and when every package
# is present the script does nothing at all (no apt-get call, no root needed).
#
# Usage: scripts/install-deps.sh [--list]
#   --list   print the package list and exit
set -eu

PACKAGES="gcc clang make cmake pkg-config libc6-dev libcmocka-dev libjansson-dev libsqlite3-dev liblapacke-dev zlib1g-dev libhiredis-dev libssl-dev redis-server gnuplot-nox chromium opencl-headers ocl-icd-opencl-dev pocl-opencl-icd python3-dev python3-numpy python3-pytest python3-pandas"

if [ "${1:-}" = "--list" ]; then
    echo $PACKAGES
    exit 0
fi
if [ $# -gt 0 ]; then
    echo "usage: $0 [--list]" >&2
    exit 2
fi

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *" installed") ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    exit 0
fi

echo "install-deps: installing missing Debian packages:$missing"
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: need root to install:$missing (run as root or install sudo)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# An out-of-date package list makes installs fail; refresh it once, then install.
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
