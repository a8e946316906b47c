#!/usr/bin/env bash
# ib_write_bw for 4 s whose server process gets no CPU for 1.5 s in the
# middle of the run (SIGSTOP, then SIGCONT), as a process can on a loaded
# host: both still exit 0 with their results. The client's retry budget
# (perftest's timeout 14 x (retry_cnt 7 + 1) = 537 ms) is shorter than the
# stop, so this holds only because a try that the server's process had no
# CPU for does not count (ResponderNotScheduled: the shm wire's ring, the
# RoCE wire's count of looks at the port). On a NIC the responder's hardware
# answers whatever its host's CPU does.
# Argument "roce": over the RoCE wire (SOFTRDMA_WIRE=roce), where the client
# must also report tries that did not count (timeouts_not_counted), or the
# stop missed the transfer and the test proved nothing.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init write_bw_stopped_server "$@"
SR_PINGPONG=ib_write_bw
sr_need_tool "$SR_PINGPONG" perftest
sr_gid_index
args=(-x "$SR_GID" -D 4 -s 4096)
sr_start_server "$SR_TMP/server.out" "${args[@]}"
SR_CLIENT_OUT="$SR_TMP/client.out"
# Line-buffered, so that its address lines show when the run starts.
sr_start "$SR_CLIENT_OUT" stdbuf -oL "$SR_PINGPONG" -d "$SR_DEVICE" -p "$SR_PORT" "${args[@]}" \
  127.0.0.1
client=$SR_LAST_PID
deadline=$((SECONDS + 20))
until grep -qs "remote address" "$SR_CLIENT_OUT"; do
  ((SECONDS < deadline)) || sr_fail "the client did not connect within 20 s"
  sr_alive "$client" || break
  sleep 0.05
done
sleep 0.5
sr_alive "$client" || sr_fail "the client ended before the server could be stopped"
sr_kill_group "$SR_SERVER_PID" STOP
sleep 1.5
sr_kill_group "$SR_SERVER_PID" CONT
sr_log "server stopped for 1.5 s in the middle of the run"
sr_wait "$client"
SR_CLIENT_RC=$SR_RC
((SR_CLIENT_RC == 0)) || sr_kill_group "$SR_SERVER_PID" TERM
sr_wait "$SR_SERVER_PID"
SR_SERVER_RC=$SR_RC
sr_show_pair_outputs
((SR_CLIENT_RC == 0)) || sr_fail "client exited with $SR_CLIENT_RC"
((SR_SERVER_RC == 0)) || sr_fail "server exited with $SR_SERVER_RC"
grep -qE '^[[:space:]]+4096[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' "$SR_CLIENT_OUT" ||
  sr_fail "no result row in the client's output"
sr_expect_roce_traffic
if [[ "${SR_VARIANT:-}" == roce ]]; then
  spared=$(sed -nE 's/.*softrdma\[[0-9]+\] roce: .*timeouts_not_counted=([0-9]+).*/\1/p' \
    "$SR_CLIENT_OUT" | tail -n 1)
  ((${spared:-0} > 0)) || sr_fail "the client counted every try: the stop missed the transfer"
  sr_log "the client's tries that did not count: $spared"
fi
sr_log "PASS: the transfer survived a 1.5 s stop of the server"
