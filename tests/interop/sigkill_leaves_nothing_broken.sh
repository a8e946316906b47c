#!/usr/bin/env bash
# A server SIGKILLed while waiting for its client leaves its ring behind; the
# next processes in the same namespace still run a full pingpong, and the dead
# process's objects are reclaimed: afterwards only the registry remains.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init sigkill_leaves_nothing_broken "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index

sr_start_server "$SR_TMP/killed.out" -g "$SR_GID"
victim=$(sr_child_of "$SR_SERVER_PID") || sr_fail "cannot find the server under timeout PID $SR_SERVER_PID"
sr_log "server $victim waiting on port $SR_PORT; shm: $(sr_shm_files | tr '\n' ' ')"
sr_kill_group "$SR_SERVER_PID" KILL # timeout and ibv_rc_pingpong: no chance to clean up
sr_wait "$SR_SERVER_PID"
((SR_RC == 128 + 9)) || sr_fail "killed server exited with $SR_RC, expected SIGKILL (137)"
# The orphaned server may linger as a zombie until init reaps it; dead is dead.
deadline=$((SECONDS + 5))
while sr_alive "$victim"; do
  ((SECONDS < deadline)) || sr_fail "server $victim still running 5 s after SIGKILL"
  sleep 0.05
done
sr_log "server SIGKILLed; left behind: $(sr_shm_files | tr '\n' ' ')"

sr_pingpong -g "$SR_GID"
sr_expect_transfer 4096 1000

after=$(sr_shm_files)
sr_log "after the second pingpong: ${after:-(nothing)}"
sr_expect_only_registry "$after"
sr_log "PASS: a SIGKILLed server broke nothing and was reclaimed"
