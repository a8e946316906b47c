#!/usr/bin/env bash
# rping (rdmacm-utils) with SOFTRDMA_CM_GSI=1: the CM's messages travel as
# they do to another host, as UD SENDs to QP1 (the GSI) of the peer's address,
# handed by the GSI forwarder to the listener's and then to each side's CM
# socket (docs/design.md, "Connection manager: other hosts"), instead of
# straight between the CM sockets. Both sides must say (SOFTRDMA_LOG=info)
# that a MAD reached them through QP1, and rping must pass as rping_loopback
# (100 pings echoed intact, both exit 0). The datagrams to QP1 of this host
# go through the shm wire to the same forwarder a datagram from another host
# reaches; the data QPs are not affected.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
export SOFTRDMA_CM_GSI=1 SOFTRDMA_LOG=info
sr_init rping_cm_gsi inherit
sr_need_tool rping rdmacm-utils
sr_cm_rping 127.0.0.1
for side in server client; do
  sr_cm_expect_line "$side" err 'cm: first MAD through QP1 \(the GSI\)' "a MAD received through QP1"
done
sr_log "PASS: both CMs spoke through QP1"
