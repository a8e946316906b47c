#!/usr/bin/env bash
# Under softrdma run, /dev/infiniband/<uverbs node of softrdma0> and
# /dev/infiniband/rdma_cm are character devices the user may read and
# write (what UCX checks), named as ibv_devinfo's device and sysfs say; the
# rest of /dev is unchanged, and /dev/shm is the very same file system.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_dev_nodes
cli_need_run

out="$SR_TMP/out"
cli_run "$out" run sh -c '
  node=$(ls /sys/class/infiniband_verbs | grep -v abi_version)
  [ "$node" = usoftrdma0 ] || { echo "uverbs node is \"$node\""; exit 91; }
  for f in /dev/infiniband/$node /dev/infiniband/rdma_cm; do
    test -c "$f" && test -r "$f" && test -w "$f" || { echo "$f is not a usable character device"; exit 92; }
  done
  echo written >/dev/infiniband/$node || exit 93
  for e in /dev/* /dev/.[!.]*; do
    if { [ -e "$e" ] || [ -L "$e" ]; } && [ "$e" != /dev/infiniband ]; then echo "${e#/dev/}"; fi
  done | sort >"$1/inside.list"
  stat -c "%d %i" /dev/shm >"$1/inside.shm"
  test -c /dev/null && test -c /dev/zero && head -c 4 /dev/zero | od -An -tx1 | grep -q "00 00 00 00" || exit 94
' sh "$SR_TMP"
((CLI_RC == 0)) || sr_fail "checks under softrdma run exited with $CLI_RC"
for e in /dev/* /dev/.[!.]*; do
  if [[ (-e "$e" || -L "$e") && "$e" != /dev/infiniband ]]; then echo "${e#/dev/}"; fi
done | sort >"$SR_TMP/outside.list"
diff -u "$SR_TMP/outside.list" "$SR_TMP/inside.list" || sr_fail "/dev lists other entries inside"
[[ "$(stat -c '%d %i' /dev/shm)" == "$(cat "$SR_TMP/inside.shm")" ]] ||
  sr_fail "/dev/shm inside is not the same file system as outside"
sr_log "PASS: /dev/infiniband/usoftrdma0 and rdma_cm are R/W character devices; /dev otherwise unchanged"
