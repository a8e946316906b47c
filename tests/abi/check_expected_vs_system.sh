#!/usr/bin/env bash
# Validates libibverbs.expected and libibverbs.versions.expected themselves:
# runs check_exports.sh against the installed rdma-core 44 library
# (libibverbs.so.1.14.44.0), whose export set they transcribe. Exits 77
# (ctest: skipped) when that exact release is not installed, because any
# other release legitimately exports a different set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
real=""
for candidate in /usr/lib/*/libibverbs.so.1.14.44.0 /usr/lib64/libibverbs.so.1.14.44.0 \
  /usr/lib/libibverbs.so.1.14.44.0; do
  if [[ -e "$candidate" ]]; then
    real="$candidate"
    break
  fi
done
if [[ -z "$real" ]]; then
  echo "SKIP: rdma-core 44's libibverbs.so.1.14.44.0 is not installed"
  exit 77
fi

# check_exports.sh takes a directory holding libibverbs.so.1.
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
ln -s "$real" "$dir/libibverbs.so.1"
"$here/check_exports.sh" "$dir"
