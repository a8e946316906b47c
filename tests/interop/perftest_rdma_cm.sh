#!/usr/bin/env bash
# One unmodified perftest tool (Debian's perftest) with -R: the QPs are made
# and connected by rdma_cm, which also carries the parameter exchange (no TCP
# socket). Server `TOOL -d softrdma0 -R -p PORT [options]` (PORT free, from
# sr_cm_free_port: parallel runs must not meet on one port), client the same
# plus 127.0.0.1 (no -x: rdma_cm picks the GID from the address). Both must
# exit 0, both report "Data ex. method : rdma_cm", and the client must print
# its result table (a row of figures under the "#bytes" header).
#
# perftest -R makes two rdma_cm connections to the same port: first the one
# that carries the parameter exchange, then, once the server has listened
# again, the test QPs'. Nothing orders the client's second REQ after the
# server's second rdma_listen, and perftest 4.5 crashes (SIGSEGV) in its
# retry when that REQ is refused. softrdma's CM offers a REQ that finds its
# port unbound again for 250 ms before it answers "nobody listens" (a REQ on
# a network is judged when it arrives; docs/design.md), so the client's REQ
# meets the listener: one run, no retry, must pass.
# Variant "gsi": SOFTRDMA_CM_GSI=1, so the CM's messages go as UD SENDs to
# QP1 of the peer's address, as to another host (docs/design.md); both sides
# must say (SOFTRDMA_LOG=info) that a MAD reached them that way. The REQ that
# finds the port unbound is answered REJ by the GSI forwarder and offered
# again for 250 ms by the client's CM, as between local sockets.
# Usage: perftest_rdma_cm.sh [cma0|gsi|-] TOOL [perftest options...]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
variant=$1
tool=$2
shift 2
[[ "$variant" == "-" ]] && variant=""
name="perftest_rdma_cm_${tool}$(printf '_%s' "$@" | tr -c 'A-Za-z0-9_\n' '_')"
over_qp1=0
if [[ "$variant" == "gsi" ]]; then
  export SOFTRDMA_CM_GSI=1 SOFTRDMA_LOG=info
  name="$name-gsi"
  variant=inherit
  over_qp1=1
fi
sr_init "$name" ${variant:+"$variant"}
sr_need_tool "$tool" perftest
sr_cm_free_port
port=$SR_CM_PORT
sr_cm_pair "$port" -- "$tool" -d "$SR_DEVICE" -R -p "$port" "$@" \
  -- "$tool" -d "$SR_DEVICE" -R -p "$port" "$@" 127.0.0.1
sr_cm_expect_both_exit_0
for side in server client; do
  sr_cm_expect_line "$side" out '^ *Data ex\. method *: *rdma_cm' "'Data ex. method : rdma_cm'"
done
grep -q '#bytes' "$SR_CLIENT_OUT" || sr_fail "no result table in the client's output"
if ((over_qp1)); then
  for side in server client; do
    sr_cm_expect_line "$side" err 'cm: first MAD through QP1 \(the GSI\)' "a MAD received through QP1"
  done
fi
rows=$(grep -cE '^[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' "$SR_CLIENT_OUT" || true)
((rows >= 1)) || sr_fail "the client's result table has no rows"
sr_log "PASS: $tool -R${*:+ $*} — $rows result row(s); client $SR_CLIENT_SECS s, server $SR_SERVER_SECS s"
