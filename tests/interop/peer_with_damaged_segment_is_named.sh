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
segment=$(sr_shm_files | grep -- '-proc-' || true)
[[ -n "$segment" && "$segment" != *$'\n'* ]] ||
  sr_fail "expected one process segment of the server, found: ${segment:-(none)}"
# The header starts with the magic (8 bytes).
printf 'garbage!' | dd of="$segment" bs=1 seek=0 conv=notrunc status=none
sr_log "server's segment $segment now has a damaged header"

unset SOFTRDMA_LOG
sr_pingpong_client -g "$SR_GID" -n 5
((SR_CLIENT_RC != 0)) || sr_fail "the client exchanged messages with a peer it cannot read"
((SR_CLIENT_RC < 124)) || sr_fail "the client ended with $SR_CLIENT_RC (a signal or the deadline)"
lines=$(grep -c '^softrdma\[' "$SR_CLIENT_OUT" || true)
((lines == 1)) || sr_fail "$lines lines from softrdma in the client's output, expected one"
for part in "error: $segment: segment of pid " \
  " is damaged (not a softrdma segment header); pid " \
  " cannot be reached: restart it, or run this process in another SOFTRDMA_NAMESPACE" \
  "transport retry counter exceeded"; do
  grep -qF -- "$part" "$SR_CLIENT_OUT" || {
    cat "$SR_CLIENT_OUT" >&2
    sr_fail "the client's output does not say '$part'"
  }
done
sr_log "PASS: $(grep -m1 '^softrdma\[' "$SR_CLIENT_OUT")"
