#!/usr/bin/env bash
# ibv_devices (unmodified, from ibverbs-utils) lists softrdma0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init devices_lists_softrdma0 "$@"
sr_need_tool ibv_devices ibverbs-utils

out="$SR_TMP/ibv_devices.out"
sr_run_ok "$out" ibv_devices
# Rows are "    <name>  <tab><16 hex digits of node GUID>".
grep -Eq "^[[:space:]]+${SR_DEVICE}[[:space:]]+[0-9a-f]{16}[[:space:]]*$" "$out" ||
  sr_fail "ibv_devices does not list $SR_DEVICE with a node GUID"
sr_log "PASS: ibv_devices lists $SR_DEVICE"
