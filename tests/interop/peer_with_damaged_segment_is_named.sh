#!/usr/bin/env bash
# A peer whose shared segment is damaged (its header is not a softrdma
# segment's) cannot be talked to. The connecting side says so on one line of
# stderr naming the segment, the peer's pid and the fix, whatever SOFTRDMA_LOG
# says, fails its sends as to a peer that is gone, and does not crash.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init peer_with_damaged_segment_is_named "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index

sr_start_server "$SR_TMP/server.out" -g "$SR_GID" -n 5
sr_server_segment
segment=$SR_SEGMENT
# The header starts with the magic (8 bytes).
printf 'garbage!' | dd of="$segment" bs=1 seek=0 conv=notrunc status=none
sr_log "server's segment $segment now has a damaged header"

unset SOFTRDMA_LOG
sr_pingpong_client -g "$SR_GID" -n 5
((SR_CLIENT_RC != 0)) || sr_fail "the client exchanged messages with a peer it cannot read"
((SR_CLIENT_RC < 124)) || sr_fail "the client ended with $SR_CLIENT_RC (a signal or the deadline)"
sr_expect_one_softrdma_line "$SR_CLIENT_OUT" "error: $segment: segment of pid " \
  " is damaged (not a softrdma segment header); pid " \
  " cannot be reached: restart it, or run this process in another SOFTRDMA_NAMESPACE" \
  "transport retry counter exceeded"
sr_log "PASS: $(grep -m1 '^softrdma\[' "$SR_CLIENT_OUT")"
