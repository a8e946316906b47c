#!/usr/bin/env bash
# ibv_devinfo -v shows softrdma0 with port 1 PORT_ACTIVE, link layer Ethernet,
# and a ::ffff:127.0.0.1 GID in its GID table.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init devinfo_port_active_and_loopback_gid "$@"
sr_need_tool ibv_devinfo ibverbs-utils

out="$SR_TMP/ibv_devinfo.out"
sr_run_ok "$out" ibv_devinfo -v
grep -Eq "^hca_id:[[:space:]]+$SR_DEVICE$" "$out" || sr_fail "no 'hca_id: $SR_DEVICE'"
grep -Eq "^[[:space:]]+port:[[:space:]]+1$" "$out" || sr_fail "no port 1"
grep -Eq "^[[:space:]]+state:[[:space:]]+PORT_ACTIVE \(4\)$" "$out" || sr_fail "port is not PORT_ACTIVE"
grep -Eq "^[[:space:]]+link_layer:[[:space:]]+Ethernet$" "$out" || sr_fail "link layer is not Ethernet"
sr_gid_index # fails unless a "GID[ N]: ::ffff:127.0.0.1" line is there
sr_log "PASS: $SR_DEVICE port 1 PORT_ACTIVE, Ethernet, GID[$SR_GID] = $SR_LOOPBACK_GID"
