#!/usr/bin/env bash
# An rdma_cm server waiting for its client uses no CPU: `rping -s -a
# 127.0.0.1 -C 10` has bound and is listening (its own CM-event thread
# blocked in rdma_get_cm_event, softrdma's CM thread waiting on its sockets
# and timers, main thread in sem_wait); utime+stime of the whole process (all
# threads, /proc/<pid>/stat) grows by at most 2 clock ticks over 2 s. A
# client (`rping -c -a 127.0.0.1 -v -C 10`) then completes its 10 pings,
# showing the server was live, and both exit 0 (a run that fails only by
# rping's own teardown race is done again: see sr_cm_rping_judge in
# cm_lib.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init rping_server_idle_no_cpu "$@"
sr_need_tool rping rdmacm-utils

window=2 max_ticks=2
cpu_ticks() { echo $(($(sr_stat_field "$pid" 11) + $(sr_stat_field "$pid" 12))); }
for ((attempt = 1; ; attempt++)); do
  sr_cm_free_port
  sr_cm_start_server "$SR_CM_PORT" rping -s -a 127.0.0.1 -p "$SR_CM_PORT" -C 10
  pid=$(sr_child_of "$SR_SERVER_PID") || sr_fail "cannot find the server process under timeout PID $SR_SERVER_PID"
  read -r comm <"/proc/$pid/comm"
  [[ "$comm" == rping ]] || sr_fail "process $pid is '$comm', not rping"

  sleep 0.5 # let start-up work finish
  t0=$(cpu_ticks) w0=$(sr_cm_now)
  sleep "$window"
  sr_alive "$pid" || sr_fail "server exited while waiting for its client"
  t1=$(cpu_ticks) w1=$(sr_cm_now)
  hz=$(getconf CLK_TCK)
  used=$((t1 - t0))
  sr_log "server PID $pid, threads $(sr_stat_field "$pid" 17): utime+stime $t0 -> $t1 ticks" \
    "= $used ticks (CLK_TCK $hz) over $(sr_cm_secs "$w0" "$w1") s; allowed $max_ticks"
  ((used <= max_ticks)) || sr_fail "waiting server used $used clock ticks in ${window} s (> $max_ticks)"

  sr_cm_run_client rping -c -a 127.0.0.1 -p "$SR_CM_PORT" -v -C 10
  sr_cm_wait_server
  sr_cm_show
  sr_cm_rping_judge "$attempt" || break
done
sr_cm_rping_expected 10 64 >"$SR_TMP/expected.out"
diff -u "$SR_TMP/expected.out" "$SR_CLIENT_OUT" ||
  sr_fail "the client's ping data differs from what rping sent"
sr_log "PASS: idle rdma_cm server used $used <= $max_ticks ticks in ${window} s; then 10 pings (run $attempt)"
