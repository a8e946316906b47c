#!/usr/bin/env bash
# ibv_xsrq_pingpong (XRC: a domain shared through /tmp/xrc_domain, an XRC
# SRQ, XRC initiator and target QPs on each side): server and client with
# -g <loopback GID index> and the defaults (4096 bytes, 5 messages each
# way). Both exit 0 and print "success"; each side's remote QPNs and SRQ
# number are the other side's local ones.
# Argument "cma0": the same with SOFTRDMA_CMA=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init xsrq_pingpong_gid "$@"
SR_PINGPONG=ibv_xsrq_pingpong
sr_need_tool "$SR_PINGPONG" ibverbs-utils
sr_gid_index
sr_pingpong -g "$SR_GID"

((SR_SERVER_RC == 0)) || sr_fail "server exited with $SR_SERVER_RC"
((SR_CLIENT_RC == 0)) || sr_fail "client exited with $SR_CLIENT_RC"
# "   local: LID 0000, QPN RECV 000018 SEND 000019, PSN 93014c, SRQN 000017, GID ..."
addr() { # FILE local|remote -> "RECV SEND SRQN"
  sed -nE "s/^ *$2: LID [0-9a-f]+, QPN RECV ([0-9a-f]+) SEND ([0-9a-f]+), PSN [0-9a-f]+, SRQN ([0-9a-f]+), GID (.*)$/\1 \2 \3 \4/p" "$1" | head -n1
}
for side in server client; do
  if [[ $side == server ]]; then f=$SR_SERVER_OUT; else f=$SR_CLIENT_OUT; fi
  grep -qx success "$f" || sr_fail "$side did not report success"
  [[ "$(addr "$f" local | cut -d' ' -f4)" == "$SR_LOOPBACK_GID" ]] ||
    sr_fail "$side did not use GID $SR_LOOPBACK_GID"
done
s_local=$(addr "$SR_SERVER_OUT" local | cut -d' ' -f1-3)
c_local=$(addr "$SR_CLIENT_OUT" local | cut -d' ' -f1-3)
[[ -n "$s_local" && -n "$c_local" ]] || sr_fail "missing local address line"
[[ "$(addr "$SR_SERVER_OUT" remote | cut -d' ' -f1-3)" == "$c_local" ]] ||
  sr_fail "server's remote QPNs/SRQN are not the client's ($c_local)"
[[ "$(addr "$SR_CLIENT_OUT" remote | cut -d' ' -f1-3)" == "$s_local" ]] ||
  sr_fail "client's remote QPNs/SRQN are not the server's ($s_local)"
sr_log "PASS: 5 messages of 4096 bytes each way through XRC SRQs, RECV/SEND/SRQN $s_local <-> $c_local"
