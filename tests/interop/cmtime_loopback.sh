#!/usr/bin/env bash
# cmtime (rdmacm-utils): 100 RC connections (its default) created, resolved,
# connected and disconnected through rdma_cm on 127.0.0.1, on a free port P
# (sr_cm_free_port). Server `cmtime -p P`, client `cmtime -s 127.0.0.1 -p P`.
#
# The client exits 0 after timing every step; it must print its table with a
# row for each step and no error line. rdma-core 44's cmtime server never
# exits by design: after rdma_listen it handles CM events (accepting each
# request, disconnecting and destroying each id on DISCONNECTED) until
# rdma_get_cm_event fails, with no connection count or timeout (-c only sizes
# the client). So once the client has exited 0 the server must still be
# running, with nothing on stderr (cmtime reports its failures there with
# perror); then it is stopped by its PID (SIGTERM to the process group we
# started) and must die of that signal.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init cmtime_loopback "$@"
sr_need_tool cmtime rdmacm-utils
sr_cm_free_port
sr_cm_start_server "$SR_CM_PORT" cmtime -p "$SR_CM_PORT"
sr_cm_run_client cmtime -s 127.0.0.1 -p "$SR_CM_PORT"
if ((SR_CLIENT_RC != 0)); then
  sr_cm_wait_server
  sr_cm_show
  sr_fail "client exited with $SR_CLIENT_RC"
fi
# Let the server handle the DISCONNECTED events of the client's last ids.
sleep 0.5
if ! sr_alive "$SR_SERVER_PID"; then
  sr_wait "$SR_SERVER_PID"
  SR_SERVER_RC=$SR_RC
  sr_cm_show
  sr_fail "the server exited by itself (code $SR_SERVER_RC); rdma-core 44's cmtime server never does"
fi
sr_kill_group "$SR_SERVER_PID" TERM
sr_wait "$SR_SERVER_PID"
SR_SERVER_RC=$SR_RC
sr_log "server stopped by SIGTERM: exit code $SR_SERVER_RC"
sr_cm_show
# timeout(1) passes the signal on and exits with the program's status: 143.
((SR_SERVER_RC == 143)) || sr_fail "server did not die of SIGTERM (exit code $SR_SERVER_RC, expected 143)"
[[ ! -s "$SR_SERVER_ERR" ]] || sr_fail "the server printed errors on stderr"
sr_cm_expect_line client out '^step +total ms +max ms +min us +us / conn$' "its table header"
for step in 'create id' 'resolve addr' 'resolve route' 'create qp' 'connect' 'disconnect' 'destroy'; do
  sr_cm_expect_line client out "^$step *:( +[0-9]+\\.[0-9]+){4}\$" "a '$step' row"
done
if grep -Eq 'error|fail' "$SR_CLIENT_OUT" "$SR_CLIENT_ERR"; then
  sr_fail "the client reported an error"
fi
connect_ms=$(sr_first "$SR_CLIENT_OUT" '^connect *: +([0-9.]+) .*')
sr_log "PASS: cmtime, 100 connections (connect step $connect_ms ms in all); client $SR_CLIENT_SECS s"
