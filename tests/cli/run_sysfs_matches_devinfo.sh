#!/usr/bin/env bash
# Under softrdma run, /sys/class/infiniband/softrdma0 and
# /sys/class/infiniband_verbs hold the values ibv_devinfo -v reports (read in
# the same run): GUIDs, firmware, port state, physical state, link layer,
# LIDs, every GID with its type and interface, the net device; and
# ibv_devinfo -v prints exactly the same inside as outside.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_sysfs_matches_devinfo
sr_need_tool ibv_devinfo ibverbs-utils
cli_need_run

# "::ffff:127.0.0.1" -> "0000:0000:0000:0000:0000:ffff:7f00:0001"
expand_gid() {
  local a=$1 head tail g out="" i
  local -a h t groups
  if [[ $a =~ ^(.*:)([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)$ ]]; then
    a=$(printf '%s%x:%x' "${BASH_REMATCH[1]}" $((BASH_REMATCH[2] * 256 + BASH_REMATCH[3])) \
      $((BASH_REMATCH[4] * 256 + BASH_REMATCH[5])))
  fi
  if [[ $a == *::* ]]; then head=${a%%::*} tail=${a#*::}; else head=$a tail=""; fi
  IFS=: read -ra h <<<"$head"
  IFS=: read -ra t <<<"$tail"
  groups=("${h[@]}")
  for ((i = 0; i < 8 - ${#h[@]} - ${#t[@]}; i++)); do groups+=(0); done
  groups+=("${t[@]}")
  for g in "${groups[@]}"; do out+=$(printf '%04x:' $((16#${g:-0}))); done
  echo "${out%:}"
}

dump="$SR_TMP/inside.out"
# One run: ibv_devinfo, then every attribute as "path=value" lines.
cli_run "$dump" run sh -c '
  ibv_devinfo -v
  echo "=== sysfs"
  cd /sys/class/infiniband/softrdma0 || exit 90
  for f in node_type node_guid sys_image_guid fw_ver ports/1/*; do
    [ -f "$f" ] && echo "$f=$(cat "$f")"
  done
  for f in ports/1/gids/* ports/1/gid_attrs/types/* ports/1/gid_attrs/ndevs/*; do
    echo "$f=$(cat "$f")"
  done
  for n in device/net/*; do echo "net=${n##*/} ifindex=$(cat "$n/ifindex")"; done
  echo "ibdev=$(cat /sys/class/infiniband_verbs/usoftrdma0/ibdev)"
  echo "uverbs_abi=$(cat /sys/class/infiniband_verbs/abi_version)"
'
((CLI_RC == 0)) || sr_fail "the dump under softrdma run exited with $CLI_RC"
devinfo="$SR_TMP/devinfo.out"
sed '/^=== sysfs$/,$d' "$dump" >"$devinfo"
sysfs="$SR_TMP/sysfs.out"
sed '1,/^=== sysfs$/d' "$dump" >"$sysfs"

attr() { grep -m1 "^$1=" "$sysfs" | cut -d= -f2-; }
field() { grep -m1 -E "^[[:space:]]+$1:" "$devinfo" | sed -E "s/^[[:space:]]+$1:[[:space:]]+//"; }
expect() { [[ "$2" == "$3" ]] || sr_fail "$1: sysfs says '$2', ibv_devinfo '$3'"; }

expect node_guid "$(attr node_guid)" "$(field node_guid)"
expect sys_image_guid "$(attr sys_image_guid)" "$(field sys_image_guid)"
expect fw_ver "$(attr fw_ver)" "$(field fw_ver)"
expect node_type "$(attr node_type)" "1: CA"
expect state "$(attr ports/1/state | cut -d: -f1)" "$(field state | sed -E 's/.*\(([0-9]+)\)/\1/')"
expect phys_state "$(attr ports/1/phys_state | cut -d: -f1)" "$(field phys_state | sed -E 's/.*\(([0-9]+)\)/\1/')"
expect link_layer "$(attr ports/1/link_layer)" "$(field link_layer)"
expect lid "$(($(attr ports/1/lid)))" "$(field port_lid)"
expect sm_lid "$(($(attr ports/1/sm_lid)))" "$(field sm_lid)"
expect ibdev "$(attr ibdev)" softrdma0
expect uverbs_abi "$(attr uverbs_abi)" 6

gids=0
while read -r index gid type; do
  expect "gids/$index" "$(attr "ports/1/gids/$index")" "$(expand_gid "$gid")"
  expect "gid_attrs/types/$index" "$(attr "ports/1/gid_attrs/types/$index")" "$type"
  ndev=$(attr "ports/1/gid_attrs/ndevs/$index")
  [[ -n "$ndev" && -e "/sys/class/net/$ndev" ]] || sr_fail "gid_attrs/ndevs/$index '$ndev' is not an interface"
  gids=$((gids + 1))
done < <(sed -nE 's/^[[:space:]]+GID\[ *([0-9]+)\]:[[:space:]]+([^,]+), (.*)$/\1 \2 \3/p' "$devinfo")
((gids > 0)) || sr_fail "ibv_devinfo -v listed no GID"
# Slots ibv_devinfo does not list read as the zero GID.
while IFS='=' read -r path value; do
  index=${path##*/}
  grep -qE "^[[:space:]]+GID\[ *$index\]:" "$devinfo" && continue
  expect "$path (empty slot)" "$value" "0000:0000:0000:0000:0000:0000:0000:0000"
done < <(grep '^ports/1/gids/' "$sysfs")

grep -q '^net=' "$sysfs" || sr_fail "device/net lists no interface"
while read -r net ifindex; do
  net=${net#net=} ifindex=${ifindex#ifindex=}
  expect "device/net/$net/ifindex" "$ifindex" "$(cat "/sys/class/net/$net/ifindex")"
done < <(grep '^net=' "$sysfs")

# The same library outside gives the same ibv_devinfo -v.
outside="$SR_TMP/outside.out"
sr_run_ok "$outside" ibv_devinfo -v
diff -u "$outside" "$devinfo" || sr_fail "ibv_devinfo -v differs inside softrdma run"
sr_log "PASS: $gids GIDs, GUIDs, port attributes and net devices match ibv_devinfo -v"
