#!/usr/bin/env bash
# A host registry that cannot be used (another layout version, a damaged
# header, truncated) makes ibv_open_device fail as documented
# (docs/configuration.md, "Unusable shared memory") with one line on stderr
# naming the file, the reason and the fix, whatever SOFTRDMA_LOG says; never
# a crash. ibv_get_device_list still lists softrdma0, and removing the file
# (the fix the line gives) is enough.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init unusable_registry_is_named "$@"
sr_need_tool ibv_devinfo ibverbs-utils
sr_need_tool ibv_devices ibverbs-utils
unset SOFTRDMA_LOG

registry="/dev/shm/softrdma-$SR_NS-$(id -u)-registry"
out="$SR_TMP/devinfo.out"
err="$SR_TMP/devinfo.err"

# damage CASE: make the registry unusable in one way.
damage() {
  case "$1" in
    version) printf '\xe7\x03\x00\x00' | dd of="$registry" bs=1 seek=8 conv=notrunc status=none ;;
    header) printf 'garbage!' | dd of="$registry" bs=1 seek=0 conv=notrunc status=none ;;
    truncated) truncate -s 4096 "$registry" ;;
    *) sr_fail "unknown damage $1" ;;
  esac
}
declare -A reason=(
  [version]="was made by another softrdma version (registry layout 999, this library uses "
  [header]="is damaged (not a softrdma registry header)"
  [truncated]="is damaged (4096 bytes, layout "
)

for what in version header truncated; do
  # A good registry first: the device opens and makes it.
  rc=0
  sr_run ibv_devinfo -d "$SR_DEVICE" >"$out" 2>"$err" || rc=$?
  ((rc == 0)) || { cat "$out" "$err" >&2; sr_fail "ibv_devinfo failed on a fresh namespace ($rc)"; }
  [[ -f "$registry" ]] || sr_fail "no registry $registry after opening the device"
  damage "$what"

  rc=0
  sr_run ibv_devinfo -d "$SR_DEVICE" >"$out" 2>"$err" || rc=$?
  sed 's/^/  | /' "$out" "$err"
  ((rc != 0)) || sr_fail "$what: ibv_devinfo opened the device with an unusable registry"
  ((rc < 124)) || sr_fail "$what: ibv_devinfo ended with $rc (a signal or the deadline), not an error"
  sr_expect_one_softrdma_line "$err" "error: cannot open softrdma0: $registry: ${reason[$what]}" \
    "; remove it once no softrdma process uses it, or set SOFTRDMA_NAMESPACE"
  line=$(grep '^softrdma\[' "$err")

  # Listing needs no shared memory: the device is still listed.
  rc=0
  sr_run ibv_devices >"$out" 2>&1 || rc=$?
  if ((rc != 0)) || ! grep -q "$SR_DEVICE" "$out"; then
    cat "$out" >&2
    sr_fail "$what: ibv_devices did not list $SR_DEVICE ($rc)"
  fi

  rm -f -- "$registry"  # the fix
  sr_log "$what: refused with: ${line#*error: }"
done
rc=0
sr_run ibv_devinfo -d "$SR_DEVICE" >"$out" 2>"$err" || rc=$?
((rc == 0)) || { cat "$out" "$err" >&2; sr_fail "ibv_devinfo failed after removing the registry"; }
sr_log "PASS: each unusable registry named on one line; removing it fixes it"
