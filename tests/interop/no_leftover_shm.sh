#!/usr/bin/env bash
# After a pingpong's two processes have exited, nothing but the host registry
# remains of the namespace in /dev/shm: each process removes its own ring at exit.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Nor of a run killed before its cleanup (ctest's timeout: SIGKILL): the next
# run removes it. A namespace of a script that has exited, of this user.
dead_pid=$(bash -c 'echo $$')
killed_run=/dev/shm/softrdma-t$dead_pid-killed_run-$(id -u)-registry
: >"$killed_run"
sr_init no_leftover_shm "$@"
if [[ -e $killed_run ]]; then
  rm -f -- "$killed_run"
  sr_fail "a killed run's $killed_run was left"
fi
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index

# While the server waits, the namespace must be in use (else this test proves nothing).
sr_start_server "$SR_TMP/server.out" -g "$SR_GID"
during=$(sr_shm_files)
sr_log "while the server waits: ${during:-(nothing)}"
[[ -n "$during" ]] || sr_fail "no /dev/shm/softrdma-$SR_NS-* while a server runs: SOFTRDMA_NAMESPACE not honoured?"

sr_pingpong_client -g "$SR_GID"
sr_expect_transfer 4096 1000

after=$(sr_shm_files)
sr_log "after both exited: ${after:-(nothing)}"
sr_expect_only_registry "$after"
sr_log "PASS: only the registry is left"
