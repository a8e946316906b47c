#!/usr/bin/env bash
# ucmatose (rdmacm-utils) with 8 RC connections at once on 127.0.0.1 (port
# 7471): server `ucmatose -c 8`, client `ucmatose -s 127.0.0.1 -c 8`. Both
# exit 0 after exchanging messages on every connection and disconnecting:
# "data transfers complete", "test complete", "return status 0" on both
# sides, "disconnected" on the server.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init ucmatose_8_connections "$@"
sr_need_tool ucmatose rdmacm-utils
sr_cm_pair 7471 -- ucmatose -c 8 -- ucmatose -s 127.0.0.1 -c 8
sr_cm_expect_both_exit_0
for side in server client; do
  sr_cm_expect_line "$side" out '^data transfers complete$' "'data transfers complete'"
  sr_cm_expect_line "$side" out '^test complete$' "'test complete'"
  sr_cm_expect_line "$side" out '^return status 0$' "'return status 0'"
done
sr_cm_expect_line server out '^disconnected$' "'disconnected'"
sr_log "PASS: ucmatose, 8 connections; client $SR_CLIENT_SECS s, server $SR_SERVER_SECS s"
