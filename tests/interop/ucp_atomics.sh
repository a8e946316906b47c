#!/usr/bin/env bash
# UCP atomics with their results checked (ucx_perftest does not check them):
# our own program (tests/ucx/ucp_atomics.c), built against Debian's
# libucx-dev, as server and client each under `softrdma run`, with UCX held
# to softrdma0:1 and the given UCX_TLS. The client runs fetch-add, swap,
# compare-and-swap (equal and different) and 100 adds on a 64-bit and a 32-bit
# word of the server and checks every fetched value and a final get; the
# server checks its memory. Both must exit 0 and print OK.
# Usage: ucp_atomics.sh cma0|- TLS
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../cli/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli/cli_lib.sh"
variant=$1
tls=$2
[[ "$variant" == "-" ]] && variant=""
cli_init "ucp_atomics_${tls//,/_}" ${variant:+"$variant"}
sr_need_tool ucx_info ucx-utils
# The headers come from libucx-dev (no command to look for): installed as
# sr_need_tool installs a tool's package (root with apt-get), else a skip.
if [[ ! -e /usr/include/ucp/api/ucp.h && "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
  sr_log "UCP headers missing: apt-get install -y libucx-dev"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    -o DPkg::Lock::Timeout=300 libucx-dev || true
fi
[[ -e /usr/include/ucp/api/ucp.h ]] ||
  sr_skip "UCP headers not found and Debian package 'libucx-dev' cannot be installed here" \
    "(needs root and apt-get); install it with: apt-get install libucx-dev"
cli_need_run

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin="$SR_TMP/ucp_atomics"
# shellcheck disable=SC2046 # pkg-config prints separate words
cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror -o "$bin" "$here/../ucx/ucp_atomics.c" \
  $(pkg-config --cflags --libs ucx 2>/dev/null || echo -lucp -luct -lucs) ||
  sr_fail "cc could not build tests/ucx/ucp_atomics.c"

export UCX_NET_DEVICES=softrdma0:1 UCX_TLS=$tls UCX_WARN_UNUSED_ENV_VARS=n
server_out="$SR_TMP/server.out"
client_out="$SR_TMP/client.out"
sr_free_port
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- "$bin" server "$SR_PORT" </dev/null >"$server_out" 2>&1 &
server=$!
SR_PIDS+=("$server")
deadline=$((SECONDS + 20))
until port_in_use "$SR_PORT" listen; do
  sr_alive "$server" || { cat "$server_out" >&2; sr_fail "server exited before listening"; }
  ((SECONDS < deadline)) || sr_fail "server did not listen on port $SR_PORT within 20 s"
  sleep 0.1
done
client_rc=0
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- "$bin" client 127.0.0.1 "$SR_PORT" \
  </dev/null >"$client_out" 2>&1 || client_rc=$?
sr_wait "$server"
sed 's/^/  client | /' "$client_out"
sed 's/^/  server | /' "$server_out"
((client_rc == 0)) || sr_fail "client exited with $client_rc (124: timed out)"
((SR_RC == 0)) || sr_fail "server exited with $SR_RC (124: timed out)"
[[ "$(tail -n1 "$client_out")" == OK && "$(tail -n1 "$server_out")" == OK ]] ||
  sr_fail "a process did not print OK last"
sr_log "PASS: UCP atomics over $tls return and leave the expected values"
