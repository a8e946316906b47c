#!/usr/bin/env bash
# A peer whose shared segment has another layout version (a process of a
# different softrdma build) cannot be talked to. The connecting side must say
# why, on one line of stderr naming the segment and the fix, whatever
# SOFTRDMA_LOG says, instead of only failing like a peer that never answers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init peer_of_another_layout_is_named "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index

sr_start_server "$SR_TMP/server.out" -g "$SR_GID" -n 5
sr_server_segment
segment=$SR_SEGMENT
# The header: magic (8 bytes), then the layout version (uint32, little endian).
printf '\xe7\x03\x00\x00' | dd of="$segment" bs=1 seek=8 conv=notrunc status=none
sr_log "server's segment $segment now claims layout 999"

unset SOFTRDMA_LOG
sr_pingpong_client -g "$SR_GID" -n 5
((SR_CLIENT_RC != 0)) || sr_fail "the client exchanged messages with a peer it cannot read"
sr_expect_one_softrdma_line "$SR_CLIENT_OUT" "error: $segment: segment of pid " \
  "of another softrdma version (segment layout 999, this library uses " \
  "; run both with the same build, or give each build its own SOFTRDMA_NAMESPACE"
sr_log "PASS: the client names the layout mismatch ($(grep -m1 'segment layout' "$SR_CLIENT_OUT"))"
