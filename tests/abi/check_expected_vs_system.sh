#!/usr/bin/env bash
# Usage: check_expected_vs_system.sh [LIBNAME]
#
# LIBNAME is libibverbs (the default) or librdmacm. Validates LIBNAME.expected
# and LIBNAME.versions.expected themselves: runs check_exports.sh against the
# installed rdma-core 44 library (libibverbs.so.1.14.44.0 or
# librdmacm.so.1.3.44.0), whose export set they transcribe. Exits 77
# (ctest: skipped) when that exact release is not installed, because any
# other release legitimately exports a different set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libname="${1:-libibverbs}"
case "$libname" in
  libibverbs) real_name=libibverbs.so.1.14.44.0 ;;
  librdmacm) real_name=librdmacm.so.1.3.44.0 ;;
  *)
    echo "usage: $0 [libibverbs|librdmacm]" >&2
    exit 2
    ;;
esac

real=""
for candidate in /usr/lib/*/"$real_name" /usr/lib64/"$real_name" /usr/lib/"$real_name"; do
  if [[ -e "$candidate" ]]; then
    real="$candidate"
    break
  fi
done
if [[ -z "$real" ]]; then
  echo "SKIP: rdma-core 44's $real_name is not installed"
  exit 77
fi

# check_exports.sh takes a directory holding LIBNAME.so.1.
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
ln -s "$real" "$dir/$libname.so.1"
"$here/check_exports.sh" "$dir" "$libname"
