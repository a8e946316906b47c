#!/usr/bin/env bash
# UCX's ucx_perftest (Debian's ucx-utils, unmodified) between two processes
# of this host, each under `softrdma run` (which presents the device files UCX
# probes), over one UCX transport of softrdma0:1. UCT tests (am_*, put_*,
# get, add_*, fadd, cswap) name the device and transport (-d, -x); UCP tests
# (tag_*, stream_*, ucp_*) get them from UCX_NET_DEVICES and UCX_TLS. Both
# processes must exit 0 and the client must print the final results row.
# Usage: ucx_perftest_pair.sh cma0|- TLS TEST [ucx_perftest options...]
#   cma0: the two-copy path (SOFTRDMA_CMA=0 SOFTRDMA_MAP_MR=0); -: the default
#   TLS: rc_verbs, ud_verbs, or a UCX_TLS list for UCP (rc_verbs,ud_verbs)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../cli/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli/cli_lib.sh"
variant=$1
tls=$2
test=$3
shift 3
[[ "$variant" == "-" ]] && variant=""
# The name also names the test's shared-memory namespace (64 characters at
# most, or its cleanup would miss the truncated files): no options in it.
cli_init "ucx_${tls//,/_}_$test" ${variant:+"$variant"}
sr_need_tool ucx_perftest ucx-utils
cli_need_run

case "$test" in
  tag_* | stream_* | ucp_*)
    export UCX_NET_DEVICES=softrdma0:1 UCX_TLS=$tls
    select=()
    ;;
  *) select=(-d softrdma0:1 -x "$tls") ;;
esac
# UCX's own warnings (e.g. about memory hooks) must not hide the result.
export UCX_WARN_UNUSED_ENV_VARS=n

server_out="$SR_TMP/server.out"
client_out="$SR_TMP/client.out"
sr_free_port
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- \
  ucx_perftest "${select[@]}" -p "$SR_PORT" </dev/null >"$server_out" 2>&1 &
server=$!
SR_PIDS+=("$server")
deadline=$((SECONDS + 20))
until port_in_use "$SR_PORT" listen; do
  sr_alive "$server" || { cat "$server_out" >&2; sr_fail "server exited before listening"; }
  ((SECONDS < deadline)) || sr_fail "server did not listen on port $SR_PORT within 20 s"
  sleep 0.1
done
sr_log "server on port $SR_PORT; client: ucx_perftest ${select[*]} 127.0.0.1 -t $test $*"
client_rc=0
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- ucx_perftest "${select[@]}" -p "$SR_PORT" \
  127.0.0.1 -t "$test" "$@" </dev/null >"$client_out" 2>&1 || client_rc=$?
sr_wait "$server"
sed 's/^/  client | /' "$client_out"
sed 's/^/  server | /' "$server_out"
((client_rc == 0)) || sr_fail "client exited with $client_rc (124: timed out)"
((SR_RC == 0)) || sr_fail "server exited with $SR_RC (124: timed out)"
grep -qE '^[[:space:]]*Final:[[:space:]]+[0-9]+' "$client_out" ||
  sr_fail "no 'Final:' results row in the client's output"
sr_log "PASS: $tls $test $*"
