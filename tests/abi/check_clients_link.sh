#!/usr/bin/env bash
# Usage: check_clients_link.sh BUILD_LIB_DIR
#
# Real clients are linked BIND_NOW: one symbol@version they import that our
# libibverbs.so.1 lacks, or one missing version node, and they do not start.
# For each installed client below, run `ldd -r` with BUILD_LIB_DIR first on
# LD_LIBRARY_PATH and fail if
#   - libibverbs.so.1 did not resolve to BUILD_LIB_DIR (the check would
#     silently be testing the system library), or
#   - any "undefined symbol" or "version ... not found" line mentions
#     libibverbs or its IBVERBS_* version nodes.
# libmlx5/libefa are checked too: perftest, UCX, libfabric and pyverbs load
# them, and they import IBVERBS_PRIVATE_34 symbols from us.
# Missing clients are skipped with a message; exits 77 (ctest: skipped) if
# none is installed.
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_LIB_DIR" >&2
  exit 2
fi

lib_dir="$(cd "$1" 2>/dev/null && pwd)" || {
  echo "FAIL: $1 is not a directory" >&2
  exit 1
}
ours="$lib_dir/libibverbs.so.1"
if [[ ! -e "$ours" ]]; then
  echo "FAIL: $ours does not exist (build the ibverbs target first)" >&2
  exit 1
fi
ours_real="$(readlink -f "$ours")"

clients=(
  /usr/bin/ibv_devices
  /usr/bin/ibv_devinfo
  /usr/bin/ibv_rc_pingpong
  /usr/bin/ibv_uc_pingpong
  /usr/bin/ibv_ud_pingpong
  /usr/bin/ibv_srq_pingpong
  /usr/bin/ibv_xsrq_pingpong
  /usr/bin/ib_write_bw
  /usr/bin/ib_send_lat
  /usr/lib/x86_64-linux-gnu/libmlx5.so.1
  /usr/lib/x86_64-linux-gnu/libefa.so.1
)

status=0
checked=0
for client in "${clients[@]}"; do
  if [[ ! -e "$client" ]]; then
    echo "SKIP: $client is not installed"
    continue
  fi
  checked=$((checked + 1))
  out="$(LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd -r "$client" 2>&1)"

  resolved="$(awk '$1 == "libibverbs.so.1" && $2 == "=>" { print $3; exit }' <<<"$out")"
  if [[ -z "$resolved" ]]; then
    echo "FAIL: $client: ldd did not resolve libibverbs.so.1:"
    sed 's/^/  /' <<<"$out"
    status=1
    continue
  fi
  if [[ "$(readlink -f "$resolved")" != "$ours_real" ]]; then
    echo "FAIL: $client: libibverbs.so.1 resolved to $resolved, not to $ours"
    status=1
    continue
  fi

  problems="$(grep -E 'undefined symbol|version .* not found' <<<"$out" | grep -i 'ibverbs')"
  if [[ -n "$problems" ]]; then
    echo "FAIL: $client:"
    sed 's/^/  /' <<<"$problems"
    status=1
  else
    echo "OK: $client"
  fi
done

if [[ $checked -eq 0 ]]; then
  echo "SKIP: none of the clients is installed"
  exit 77
fi
exit $status
