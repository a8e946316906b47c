#!/usr/bin/env bash
# libfabric's verbs provider (Debian's libfabric-bin, unmodified fi_pingpong)
# between two processes of this host, each under `softrdma run` (libfabric
# finds the device through softrdma's librdmacm and the files softrdma run
# presents). The provider is forced (-p verbs) and so is the domain
# (softrdma0, or softrdma0-dgram for datagram endpoints): nothing else may
# carry the test. Every byte is checked (-c). Both processes must exit 0 and
# the client must print a results row, every message acknowledged, for each
# size from 64 B to the largest the endpoint type carries (1 MiB; 4 KiB for
# DGRAM, one MTU).
# Usage: libfabric_pingpong.sh cma0|- EP_TYPE [ipv6|tagged|xrc]
#   cma0: the two-copy path (SOFTRDMA_CMA=0 SOFTRDMA_MAP_MR=0); -: the default
#   EP_TYPE: msg (verbs RC over rdma_cm), rdm (ofi_rxm over verbs RC),
#            rxd (RDM by ofi_rxd over verbs UD), dgram (verbs UD)
#   ipv6: the control and rdma_cm addresses are ::1; tagged: fi_tsend/fi_trecv;
#   xrc: ofi_rxm over XRC MSG endpoints (FI_VERBS_PREFER_XRC=1 with
#   FI_OFI_RXM_USE_SRX=1: an XRC initiator QP per peer, an XRC target QP and
#   SRQ, connected through rdma_cm ids of RDMA_PS_TCP and RDMA_PS_UDP)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../cli/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli/cli_lib.sh"
variant=$1
ep=$2
mode=${3:-}
[[ "$variant" == "-" ]] && variant=""
cli_init "libfabric_${ep}${mode:+_$mode}" ${variant:+"$variant"}
sr_need_tool fi_pingpong libfabric-bin
cli_need_run

iterations=50
opts=(-c -I "$iterations")
server_addr=127.0.0.1
case "$ep" in
  msg | rdm) opts+=(-p verbs -e "$ep" -d softrdma0) sizes=(64 256 1k 4k 64k 1m) ;;
  rxd) opts+=(-p "verbs;ofi_rxd" -e rdm -d softrdma0-dgram) sizes=(64 256 1k 4k 64k 1m) ;;
  dgram) opts+=(-p verbs -e dgram -d softrdma0-dgram) sizes=(64 256 1k 4k) ;;
  *) sr_fail "unknown endpoint type '$ep' (expected msg, rdm, rxd or dgram)" ;;
esac
case "$mode" in
  "") ;;
  ipv6) opts+=(-6) server_addr=::1 ;;
  tagged) opts+=(-m tagged) ;;
  xrc) export FI_VERBS_PREFER_XRC=1 FI_OFI_RXM_USE_SRX=1 ;;
  *) sr_fail "unknown mode '$mode' (expected ipv6, tagged or xrc)" ;;
esac

# fi_pingpong's crash handler writes a backtrace file into the working
# directory: keep it among our temporary files.
cd "$SR_TMP"
server_out="$SR_TMP/server.out"
client_out="$SR_TMP/client.out"
sr_free_port
# -B: the server's control port; -P: the port the client connects to.
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- \
  fi_pingpong "${opts[@]}" -B "$SR_PORT" </dev/null >"$server_out" 2>&1 &
server=$!
SR_PIDS+=("$server")
deadline=$((SECONDS + 20))
until port_in_use "$SR_PORT" listen; do
  sr_alive "$server" || { cat "$server_out" >&2; sr_fail "server exited before listening"; }
  ((SECONDS < deadline)) || sr_fail "server did not listen on port $SR_PORT within 20 s"
  sleep 0.1
done
sr_log "server on port $SR_PORT; client: fi_pingpong ${opts[*]} -P $SR_PORT $server_addr"
client_rc=0
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- \
  fi_pingpong "${opts[@]}" -P "$SR_PORT" "$server_addr" </dev/null >"$client_out" 2>&1 || client_rc=$?
sr_wait "$server"
sed 's/^/  client | /' "$client_out"
sed 's/^/  server | /' "$server_out"
# Every size's results row, every message acknowledged ("=N"), on both sides.
all_rows() {
  local size
  for size in "${sizes[@]}"; do
    grep -qE "^$size[[:space:]]+$iterations[[:space:]]+=$iterations[[:space:]]" "$1" || return 1
  done
}
if ((client_rc != 0 || SR_RC != 0)) && all_rows "$client_out" && all_rows "$server_out" &&
  grep -qE 'terminated with signal 11|work request flushed error' "$client_out" "$server_out"; then
  # libfabric 1.17's own bug (docs/middleware.md, "libfabric"): every message
  # of every size was exchanged and checked, then ofi_rxm handled a completion
  # of a connection whose MSG endpoint it had already closed (rxm_close_conn
  # closes, then flushes the CQ; fixed upstream in 2026), about 1 RDM run in
  # 20. Reported as a skip, so that it is visible without failing the suite.
  sr_skip "data exchange complete and checked, then the known ofi_rxm teardown failure" \
    "(client exit $client_rc, server exit $SR_RC)"
fi
((client_rc == 0)) || sr_fail "client exited with $client_rc (124: timed out)"
((SR_RC == 0)) || sr_fail "server exited with $SR_RC (124: timed out)"
for size in "${sizes[@]}"; do
  # bytes  #sent  #ack ...: "=N" when every message sent was acknowledged.
  grep -qE "^$size[[:space:]]+$iterations[[:space:]]+=$iterations[[:space:]]" "$client_out" ||
    sr_fail "no results row for $size bytes with all $iterations messages acknowledged"
done
sr_log "PASS: verbs ${ep}${mode:+ $mode}, ${sizes[0]} B to ${sizes[-1]}, data checked"
