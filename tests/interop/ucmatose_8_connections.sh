#!/usr/bin/env bash
# ucmatose (rdmacm-utils) with 8 RC connections at once on 127.0.0.1 (a free
# port P): server `ucmatose -p P -c 8`, client `ucmatose -s 127.0.0.1 -p P -c 8`. Both
# exit 0 after exchanging messages on every connection and disconnecting:
# "data transfers complete", "test complete", "return status 0" on both
# sides, "disconnected" on the server.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init ucmatose_8_connections "$@"
sr_need_tool ucmatose rdmacm-utils
sr_cm_free_port
sr_cm_pair "$SR_CM_PORT" -- ucmatose -p "$SR_CM_PORT" -c 8 \
  -- ucmatose -s 127.0.0.1 -p "$SR_CM_PORT" -c 8
sr_cm_expect_both_exit_0
for side in server client; do
  sr_cm_expect_line "$side" out '^data transfers complete$' "'data transfers complete'"
  sr_cm_expect_line "$side" out '^test complete$' "'test complete'"
  sr_cm_expect_line "$side" out '^return status 0$' "'return status 0'"
done
sr_cm_expect_line server out '^disconnected$' "'disconnected'"
sr_log "PASS: ucmatose, 8 connections; client $SR_CLIENT_SECS s, server $SR_SERVER_SECS s"
