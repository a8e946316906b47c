#!/usr/bin/env bash
# netns.rc_peer_death: the peer of a transfer is killed (SIGKILL) in the
# middle of it. The survivor (softrdma_rc_transfer --expect-error, the
# client on host a) must see its oldest outstanding WQE complete with
# RETRY_EXC_ERR and every later one with WR_FLUSH_ERR, each once and in
# order, its QP in ERR, and the error within timeout x (retry_cnt + 1) of
# the kill (the first try and retry_cnt retries each wait one timeout),
# plus a slack for scheduling on a loaded machine: never a hang.
#   rc_peer_death.sh LIBDIR PROGRAM
source "$(dirname "$0")/lib.sh"
libdir=$1 program=$2
timeout_code=14 retry_cnt=7
# 4.096 us x 2^timeout per try (docs/design.md), in ms.
bound_ms=$(((4096 << timeout_code) * (retry_cnt + 1) / 1000000))
slack_ms=$(sr_retry_bound_slack_ms)
sr_hosts_two
tcp_port=$((20000 + $$ % 20000))
args=(-p $tcp_port -s 4G -t $timeout_code -r $retry_cnt)
# No `timeout` wrapper for the server: its PID must be the program's own,
# the one we kill. ctest's TIMEOUT and sr_cleanup bound it.
sr_on_bg b env LD_LIBRARY_PATH="$libdir" "$program" "${args[@]}" >"$SR_DIR/server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port b $tcp_port
sr_on_bg a env LD_LIBRARY_PATH="$libdir" timeout 60 "$program" "${args[@]}" --expect-error \
  "$(sr_ipv4 b)" >"$SR_DIR/client.out" 2>&1
client=$SR_PID
sleep 1.5  # well into the transfer (4 GiB take minutes here)
kill -0 "$client" 2>/dev/null || sr_fail "the client ended before the kill: $(cat "$SR_DIR/client.out")"
killed_at=$(date +%s%N)
kill -9 "$server" 2>/dev/null || sr_fail "the server ended before the kill: $(cat "$SR_DIR/server.out")"
client_status=0
sr_wait "$client" || client_status=$?
echo "--- survivor (client, host a):"
cat "$SR_DIR/client.out"
((client_status == 0)) || sr_fail "the survivor exited with $client_status"
error_at=$(sed -n 's/.*retry_exc_at_ns=\([0-9]*\).*/\1/p' "$SR_DIR/client.out")
[[ -n $error_at ]] || sr_fail "the survivor reported no RETRY_EXC_ERR"
elapsed_ms=$(((error_at - killed_at) / 1000000))
echo "RETRY_EXC_ERR ${elapsed_ms} ms after the kill (timeout x (retry_cnt + 1) = ${bound_ms} ms, slack ${slack_ms} ms)"
((elapsed_ms <= bound_ms + slack_ms)) || sr_fail "the error came ${elapsed_ms} ms after the kill"
echo "PASS"
