#!/usr/bin/env bash
# An ibv_rc_pingpong server waiting for its client (device open, QP created,
# receives posted, blocked in accept()) uses no CPU: utime+stime of the whole
# process (all threads, /proc/<pid>/stat) grows by at most 2 clock ticks over
# 3 s. A client then completes the pingpong, showing the server was live.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init rc_pingpong_server_idle_no_cpu "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index

window=3 max_ticks=2
sr_start_server "$SR_TMP/server.out" -g "$SR_GID"
pid=$(sr_child_of "$SR_SERVER_PID") || sr_fail "cannot find the server process under timeout PID $SR_SERVER_PID"
read -r comm <"/proc/$pid/comm"
[[ "$comm" == ibv_rc_pingpon* ]] || sr_fail "process $pid is '$comm', not ibv_rc_pingpong"

cpu_ticks() { echo $(($(sr_stat_field "$pid" 11) + $(sr_stat_field "$pid" 12))); }
sleep 0.5 # let start-up work finish
t0=$(cpu_ticks) w0=$(date +%s.%N)
sleep "$window"
sr_alive "$pid" || sr_fail "server exited while waiting for its client"
t1=$(cpu_ticks) w1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
used=$((t1 - t0))
sr_log "server PID $pid, threads $(sr_stat_field "$pid" 17): utime+stime $t0 -> $t1 ticks" \
  "= $used ticks (CLK_TCK $hz) over $(awk -v a="$w0" -v b="$w1" 'BEGIN{printf "%.2f", b-a}') s; allowed $max_ticks"
((used <= max_ticks)) || sr_fail "waiting server used $used clock ticks in ${window} s (> $max_ticks)"

sr_pingpong_client -g "$SR_GID"
sr_expect_transfer 4096 1000
sr_log "PASS: idle server used $used <= $max_ticks ticks in ${window} s"
