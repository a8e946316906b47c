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
segment=$(sr_shm_files | grep -- '-proc-' || true)
[[ -n "$segment" && "$segment" != *$'\n'* ]] ||
  sr_fail "expected one process segment of the server, found: ${segment:-(none)}"
# The header: magic (8 bytes), then the layout version (uint32, little endian).
printf '\xe7\x03\x00\x00' | dd of="$segment" bs=1 seek=8 conv=notrunc status=none
sr_log "server's segment $segment now claims layout 999"

unset SOFTRDMA_LOG
sr_pingpong_client -g "$SR_GID" -n 5
((SR_CLIENT_RC != 0)) || sr_fail "the client exchanged messages with a peer it cannot read"
lines=$(grep -c '^softrdma\[' "$SR_CLIENT_OUT" || true)
((lines == 1)) || sr_fail "$lines lines from softrdma in the client's output, expected one"
for part in "error: $segment: segment of pid " \
  "of another softrdma version (segment layout 999, this library uses " \
  "; run both with the same build, or give each build its own SOFTRDMA_NAMESPACE"; do
  grep -qF -- "$part" "$SR_CLIENT_OUT" || {
    cat "$SR_CLIENT_OUT" >&2
    sr_fail "the client's line does not say '$part'"
  }
done
sr_log "PASS: the client names the layout mismatch ($(grep -m1 'segment layout' "$SR_CLIENT_OUT"))"
