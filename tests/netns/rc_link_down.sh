#!/usr/bin/env bash
# netns.rc_link_down: the veth between the hosts is taken down in the middle
# of a transfer and brought up again. Both ends (softrdma_rc_transfer
# --expect-error --reconnect-bytes) must end the transfer with RETRY_EXC_ERR
# then WR_FLUSH_ERR on every WQE that failed, each once and in order, the
# client within timeout x (retry_cnt + 1) of the link going down (plus 60
# ms for scheduling: lib.sh, sr_retry_bound_slack_ms): never a hang. Once the link is up, both make a new
# QP, exchange over a new TCP connection and move 8 MiB, checked byte for
# byte: a new QP works afterwards, in the same processes.
#   rc_link_down.sh LIBDIR PROGRAM
source "$(dirname "$0")/lib.sh"
libdir=$1 program=$2
timeout_code=14 retry_cnt=7
bound_ms=$(((4096 << timeout_code) * (retry_cnt + 1) / 1000000))
slack_ms=$(sr_retry_bound_slack_ms)
sr_hosts_two
tcp_port=$((20000 + $$ % 20000))
args=(-p $tcp_port -s 4G -t $timeout_code -r $retry_cnt --expect-error --reconnect-bytes 8M)
sr_on_bg b env LD_LIBRARY_PATH="$libdir" timeout 90 "$program" "${args[@]}" >"$SR_DIR/server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port b $tcp_port
sr_on_bg a env LD_LIBRARY_PATH="$libdir" timeout 90 "$program" "${args[@]}" "$(sr_ipv4 b)" \
  >"$SR_DIR/client.out" 2>&1
client=$SR_PID
sleep 1.5
kill -0 "$client" 2>/dev/null || sr_fail "the client ended before the link went down: $(cat "$SR_DIR/client.out")"
# The link goes down while `ip` runs (it takes 5-30 ms to start and
# finish here): the error is timed from when it returned, by which time the
# link is down, and the time from before it is printed too.
before_down=$(date +%s%N)
ip -n "$(sr_netns a)" link set a0 down
down_at=$(date +%s%N)
# The link stays down until the client has seen its error (or the bound
# and the slack are long past).
for ((i = 0; i < (bound_ms + slack_ms) / 50 + 40; i++)); do
  grep -q 'retry_exc_at_ns=' "$SR_DIR/client.out" && break
  sleep 0.05
done
ip -n "$(sr_netns a)" link set a0 up
client_status=0 server_status=0
sr_wait "$client" || client_status=$?
sr_wait "$server" || server_status=$?
echo "--- client (host a):"
cat "$SR_DIR/client.out"
echo "--- server (host b):"
cat "$SR_DIR/server.out"
((client_status == 0 && server_status == 0)) ||
  sr_fail "client exit $client_status, server exit $server_status"
error_at=$(sed -n 's/.*retry_exc_at_ns=\([0-9]*\).*/\1/p' "$SR_DIR/client.out")
[[ -n $error_at ]] || sr_fail "the client reported no RETRY_EXC_ERR"
elapsed_ms=$(((error_at - down_at) / 1000000))
echo "RETRY_EXC_ERR ${elapsed_ms} ms after the link went down ($(((error_at - before_down) / 1000000)) ms after \`ip link set down\` started; timeout x (retry_cnt + 1) = ${bound_ms} ms, slack ${slack_ms} ms)"
((elapsed_ms <= bound_ms + slack_ms)) || sr_fail "the error came ${elapsed_ms} ms after the link went down"
[[ $(grep -c '^ok: ' "$SR_DIR/client.out") -eq 1 ]] || sr_fail "no transfer on a new QP (client)"
[[ $(grep -c '^ok: ' "$SR_DIR/server.out") -eq 1 ]] || sr_fail "no transfer on a new QP (server)"
echo "PASS"
