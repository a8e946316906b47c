#!/usr/bin/env bash
# Without -g, ibv_rc_pingpong sends an address vector without GRH, which a RoCE
# port must refuse: the server's ibv_modify_qp(RTR) fails ("Failed to modify
# QP to RTR"), it drops the TCP connection, and the client then fails reading
# the server's address. Both must exit non-zero, promptly (not by timeout).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init rc_pingpong_without_gid_fails_at_rtr "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
# No -g: the address vector carries no GRH.
# shellcheck disable=SC2119
sr_pingpong

for side in server client; do
  if [[ $side == server ]]; then rc=$SR_SERVER_RC; else rc=$SR_CLIENT_RC; fi
  ((rc != 0)) || sr_fail "$side exited 0: a QP without GRH reached RTR on a RoCE port"
  ((rc != 124 && rc < 128)) || sr_fail "$side did not fail by itself (exit $rc: timeout or signal)"
done
# rc_pingpong's server is the side that moves its QP to RTR first (on receiving
# the client's address); the client never gets that far.
grep -q "Failed to modify QP to RTR" "$SR_SERVER_OUT" ||
  sr_fail "server does not report 'Failed to modify QP to RTR'"
if grep -Eq "bytes in|iters in" "$SR_SERVER_OUT" "$SR_CLIENT_OUT"; then
  sr_fail "a transfer was reported although RTR failed"
fi
sr_log "PASS: without -g both sides fail at RTR (server $SR_SERVER_RC, client $SR_CLIENT_RC)"
