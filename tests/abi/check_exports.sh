#!/usr/bin/env bash
# Usage: check_exports.sh BUILD_LIB_DIR [LIBNAME]
#
# LIBNAME is libibverbs (the default) or librdmacm. Checks that
# BUILD_LIB_DIR/LIBNAME.so.1 exports exactly what rdma-core 44's LIBNAME.so.1
# exports:
#   1. the defined dynamic symbols, as name@VERSION / name@@VERSION, equal
#      LIBNAME.expected (next to this script). Anything else that is
#      exported (a C++ mangled name, a libstdc++ symbol, an unversioned
#      helper) is reported as unexpected and fails the check;
#   2. every expected symbol is a function, except libibverbs'
#      verbs_allow_disassociate_destroy, which is a 1-byte data object
#      (clients bind to both kinds differently: data is copy-relocated into
#      executables). librdmacm exports functions only;
#   3. the version definitions and their parents equal
#      LIBNAME.versions.expected (a node name a client needs must exist,
#      and the 1.x chain must be intact).
# Prints what differs and exits non-zero on any difference.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 BUILD_LIB_DIR [libibverbs|librdmacm]" >&2
  exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libname="${2:-libibverbs}"
case "$libname" in
  libibverbs | librdmacm) ;;
  *)
    echo "usage: $0 BUILD_LIB_DIR [libibverbs|librdmacm]" >&2
    exit 2
    ;;
esac
lib="$1/$libname.so.1"
expected_syms="$here/$libname.expected"
expected_versions="$here/$libname.versions.expected"

if [[ ! -e "$lib" ]]; then
  echo "FAIL: $lib does not exist (build the ${libname#lib} target first)" >&2
  exit 1
fi
if ! command -v readelf >/dev/null; then
  echo "FAIL: readelf (binutils) is required" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Version definitions, one "NODE PARENT" line each ("-" for no parent); the
# BASE entry (the soname itself) is not a version node.
readelf -W -V "$lib" | awk '
  /^Version definition section/ { in_d = 1; next }
  /^Version (needs|symbols) section/ { in_d = 0 }
  !in_d { next }
  /Flags: BASE/ { cur = ""; next }
  /Name: / { if (cur != "") print cur, parent; cur = $NF; parent = "-"; next }
  /Parent 1: / { parent = $NF }
  END { if (cur != "") print cur, parent }
' | LC_ALL=C sort >"$work/versions.actual"
LC_ALL=C sort "$expected_versions" >"$work/versions.expected"

# Exported = defined (not UND) with global or weak binding. Each version node
# also appears as an absolute OBJECT symbol of the same name; those are
# bookkeeping, not exports, and are checked through the version table above.
readelf -W --dyn-syms "$lib" | awk -v nodes="$work/versions.actual" '
  BEGIN { while ((getline line < nodes) > 0) { split(line, f, " "); node[f[1]] = 1 } }
  $1 ~ /^[0-9]+:$/ && $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK" || $5 == "UNIQUE") {
    if ($7 == "ABS" && ($8 in node)) next
    print $8, $4, $3
  }
' >"$work/exports"
cut -d' ' -f1 "$work/exports" | LC_ALL=C sort >"$work/syms.actual"
LC_ALL=C sort "$expected_syms" >"$work/syms.expected"

status=0

if ! diff -u "$work/syms.expected" "$work/syms.actual" >"$work/syms.diff"; then
  status=1
  echo "FAIL: exported symbols differ from $expected_syms"
  echo "  ('-' = expected but not exported, '+' = exported but not expected)"
  sed -n '3,$p' "$work/syms.diff" | grep '^[-+]' | sed 's/^/  /'
  unexpected="$(LC_ALL=C comm -13 "$work/syms.expected" "$work/syms.actual")"
  if [[ -n "$unexpected" ]]; then
    echo "  $(wc -l <<<"$unexpected") unexpected export(s); anything not in the list must stay local"
  fi
fi

# Kinds: "name@ver TYPE SIZE". The data-object rule is libibverbs' only.
while read -r sym type size; do
  if [[ "$libname" == libibverbs && "$sym" == verbs_allow_disassociate_destroy@* ]]; then
    if [[ "$type" != OBJECT || "$size" != 1 ]]; then
      status=1
      echo "FAIL: $sym is $type of size $size; it must be a 1-byte OBJECT (a bool)"
    fi
  elif grep -qxF "$sym" "$work/syms.expected" && [[ "$type" != FUNC ]]; then
    status=1
    echo "FAIL: $sym is $type; it must be a FUNC"
  fi
done <"$work/exports"

if ! diff -u "$work/versions.expected" "$work/versions.actual" >"$work/versions.diff"; then
  status=1
  echo "FAIL: version definitions (NODE PARENT) differ from $expected_versions"
  sed -n '3,$p' "$work/versions.diff" | grep '^[-+]' | sed 's/^/  /'
fi

if [[ $status -eq 0 ]]; then
  echo "OK: $(wc -l <"$work/syms.actual") symbol@version pairs and" \
    "$(wc -l <"$work/versions.actual") version nodes match rdma-core 44 ($lib)"
fi
exit $status
