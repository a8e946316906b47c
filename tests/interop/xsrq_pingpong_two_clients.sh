#!/usr/bin/env bash
# ibv_xsrq_pingpong -c 2: one server, two client processes on this host that
# share the XRC domain file (/tmp/xrc_domain). The server's replies reach
# the clients' target QPs naming SRQs of the domain that live in the other
# client process as well, which that target's process hands over (XRC
# delivery to an SRQ of another process). All three exit 0 and print
# "success"; each client's remote SRQN is the server's one SRQ.
# Argument "cma0": the same with SOFTRDMA_CMA=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init xsrq_pingpong_two_clients "$@"
SR_PINGPONG=ibv_xsrq_pingpong
sr_need_tool "$SR_PINGPONG" ibverbs-utils
sr_gid_index
sr_start_server "$SR_TMP/server.out" -g "$SR_GID" -c 2
clients=()
for i in 1 2; do
  sr_start "$SR_TMP/client$i.out" "$SR_PINGPONG" -d "$SR_DEVICE" -p "$SR_PORT" -g "$SR_GID" 127.0.0.1
  clients+=("$SR_LAST_PID")
done
rcs=()
for pid in "${clients[@]}"; do
  sr_wait "$pid"
  rcs+=("$SR_RC")
done
sr_wait "$SR_SERVER_PID"
SR_SERVER_RC=$SR_RC
for f in server client1 client2; do
  sr_log "$f output:"
  sed "s/^/  $f| /" "$SR_TMP/$f.out"
done
((SR_SERVER_RC == 0)) || sr_fail "server exited with $SR_SERVER_RC"
((rcs[0] == 0 && rcs[1] == 0)) || sr_fail "clients exited with ${rcs[*]}"
srqn() { # FILE local|remote -> SRQN
  sed -nE "s/^ *$2: LID [0-9a-f]+, QPN RECV [0-9a-f]+ SEND [0-9a-f]+, PSN [0-9a-f]+, SRQN ([0-9a-f]+), .*$/\1/p" "$1" | head -n1
}
server_srqn=$(srqn "$SR_TMP/server.out" local)
[[ -n "$server_srqn" ]] || sr_fail "no local address line in the server's output"
for f in server client1 client2; do
  grep -qx success "$SR_TMP/$f.out" || sr_fail "$f did not report success"
done
c1=$(srqn "$SR_TMP/client1.out" local)
c2=$(srqn "$SR_TMP/client2.out" local)
[[ -n "$c1" && -n "$c2" && "$c1" != "$c2" ]] || sr_fail "the clients' SRQNs are not two ($c1, $c2)"
for f in client1 client2; do
  [[ "$(srqn "$SR_TMP/$f.out" remote)" == "$server_srqn" ]] ||
    sr_fail "$f's remote SRQN is not the server's $server_srqn"
done
sr_log "PASS: server SRQN $server_srqn, clients' SRQNs $c1 and $c2, 5 messages each way per client"
