#!/usr/bin/env bash
# Usage: check_clients_link.sh BUILD_LIB_DIR [LIBNAME]
#
# Real clients are linked BIND_NOW: one symbol@version they import that our
# library lacks, or one missing version node, and they do not start.
# For each installed client of LIBNAME below, run `ldd -r` with
# BUILD_LIB_DIR first on LD_LIBRARY_PATH and fail if
#   - one of our libraries did not resolve to BUILD_LIB_DIR (the check would
#     silently be testing the system library), or
#   - any "undefined symbol" or "version ... not found" line mentions one of
#     them or its version nodes.
#
# LIBNAME libibverbs (the default): ibverbs-utils, perftest and
# libmlx5/libefa (perftest, UCX, libfabric and pyverbs load them, and they
# import IBVERBS_PRIVATE_34 symbols from us); libibverbs.so.1 must be ours.
#
# LIBNAME librdmacm: the rdmacm-utils programs and perftest's ib_send_bw
# (perftest links librdmacm for -R). librdmacm.so.1 and the libibverbs.so.1
# it needs must both be ours, and every RDMACM_* and IBVERBS_* symbol@version
# these clients import must resolve: they need both to start. cmtime,
# riostream, rstream, rcopy and udpong do not link libibverbs themselves, so
# for them libibverbs.so.1 resolves only through our librdmacm's DT_NEEDED,
# which this checks too.
#
# Missing clients are skipped with a message; exits 77 (ctest: skipped) if
# none is installed.
set -uo pipefail

usage="usage: $0 BUILD_LIB_DIR [libibverbs|librdmacm]"
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "$usage" >&2
  exit 2
fi

lib_dir="$(cd "$1" 2>/dev/null && pwd)" || {
  echo "FAIL: $1 is not a directory" >&2
  exit 1
}

libname="${2:-libibverbs}"
case "$libname" in
  libibverbs)
    # Ours, in BUILD_LIB_DIR, that the clients must resolve to.
    ours_libs=(libibverbs.so.1)
    problem_pattern='ibverbs'
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
    ;;
  librdmacm)
    ours_libs=(librdmacm.so.1 libibverbs.so.1)
    problem_pattern='rdmacm|ibverbs'
    clients=(
      /usr/bin/rping
      /usr/bin/udaddy
      /usr/bin/ucmatose
      /usr/bin/cmtime
      /usr/bin/mckey
      /usr/bin/rdma_server
      /usr/bin/rdma_client
      /usr/bin/rdma_xserver
      /usr/bin/rdma_xclient
      /usr/bin/riostream
      /usr/bin/rstream
      /usr/bin/rcopy
      /usr/bin/udpong
      /usr/bin/ib_send_bw
    )
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac

declare -A ours_real
for soname in "${ours_libs[@]}"; do
  if [[ ! -e "$lib_dir/$soname" ]]; then
    echo "FAIL: $lib_dir/$soname does not exist (build the ${libname#lib} target first)" >&2
    exit 1
  fi
  ours_real[$soname]="$(readlink -f "$lib_dir/$soname")"
done

status=0
checked=0
for client in "${clients[@]}"; do
  if [[ ! -e "$client" ]]; then
    echo "SKIP: $client is not installed"
    continue
  fi
  checked=$((checked + 1))
  out="$(LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd -r "$client" 2>&1)"

  wrong_lib=0
  for soname in "${ours_libs[@]}"; do
    resolved="$(awk -v so="$soname" '$1 == so && $2 == "=>" { print $3; exit }' <<<"$out")"
    if [[ -z "$resolved" ]]; then
      echo "FAIL: $client: ldd did not resolve $soname:"
      sed 's/^/  /' <<<"$out"
      wrong_lib=1
      break
    fi
    if [[ "$(readlink -f "$resolved")" != "${ours_real[$soname]}" ]]; then
      echo "FAIL: $client: $soname resolved to $resolved, not to $lib_dir/$soname"
      wrong_lib=1
      break
    fi
  done
  if [[ $wrong_lib -ne 0 ]]; then
    status=1
    continue
  fi

  problems="$(grep -E 'undefined symbol|version .* not found' <<<"$out" | grep -iE "$problem_pattern")"
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
