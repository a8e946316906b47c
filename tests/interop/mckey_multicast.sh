#!/usr/bin/env bash
# mckey (rdmacm-utils): UD multicast through rdma_cm. Two receivers and a
# sender join one group (rdma_join_multicast_ex -> MULTICAST_JOIN -> the QP
# attached with ibv_attach_mcast); the sender posts SENDs to QPN 0xFFFFFF
# and the group's GID, and each receiver waits until every message of every
# one of its ids arrived (mckey -C: it polls until it has them all, so a lost
# datagram shows as a receiver that never finishes). All three exit 0.
# Variants: "" = IPv4 group 239.1.2.3 on 127.0.0.1, two ids per process;
# "ipv6" = group ff0e::1:2 on ::1, the sender joined send-only (-o).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
variant=${1:-}
sr_init "mckey_multicast${variant:+.$variant}"
sr_need_tool mckey rdmacm-utils
sr_need_tool stdbuf coreutils

case "$variant" in
  "") join=(-m 239.1.2.3 -b 127.0.0.1 -c 2) sender_only=() ;;
  ipv6) join=(-m ff0e::1:2 -b ::1) sender_only=(-o) ;;
  *) sr_fail "unknown variant '$variant'" ;;
esac
count=25 size=512

# Line-buffered stdout, so that "joined" can be waited for.
receivers=()
for r in 1 2; do
  sr_cm_start "receiver$r" stdbuf -oL mckey "${join[@]}" -C "$count" -S "$size"
  receivers+=("$SR_LAST_PID")
done
deadline=$((SECONDS + 20))
for r in 1 2; do
  until grep -q '^mckey: joined dgid' "$SR_TMP/receiver$r.out"; do
    ((SECONDS < deadline)) || { sr_cm_show receiver1 receiver2; sr_fail "receiver $r did not join within 20 s"; }
    sleep 0.05
  done
done
sr_log "both receivers joined"

sr_cm_start sender mckey "${join[@]}" "${sender_only[@]}" -s -C "$count" -S "$size"
sr_wait "$SR_LAST_PID"
sender_rc=$SR_RC
rcs=()
for pid in "${receivers[@]}"; do
  sr_wait "$pid"
  rcs+=("$SR_RC")
done
sr_cm_show sender receiver1 receiver2
((sender_rc == 0)) || sr_fail "sender exited with $sender_rc"
for r in 1 2; do
  ((rcs[r - 1] == 0)) || sr_fail "receiver $r exited with ${rcs[r - 1]}"
  sr_cm_expect_line "receiver$r" out '^receiving data transfers$' "'receiving data transfers'"
  sr_cm_expect_line "receiver$r" out '^data transfers complete$' "'data transfers complete'"
  sr_cm_expect_line "receiver$r" out '^return status 0$' "'return status 0'"
done
sr_cm_expect_line sender out '^initiating data transfers$' "'initiating data transfers'"
sr_cm_expect_line sender out '^return status 0$' "'return status 0'"
group=${join[1]}
[[ "$group" == *:* ]] || group="::ffff:$group"
sr_cm_expect_line receiver1 out "^mckey: joined dgid: $group " "the group's GID ($group)"
sr_log "PASS: $count multicast messages of $size bytes reached both receivers"
