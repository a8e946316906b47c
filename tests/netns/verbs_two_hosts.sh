#!/usr/bin/env bash
# netns.verbs_two_hosts: Debian's unmodified verbs programs between two hosts
# (network namespaces on a veth pair, each with its own /dev/shm: nothing but
# RoCEv2 over UDP joins them), each pair checked by its exit status:
# ibv_rc_pingpong -g 0 --chk at 1 B, 4 KiB and 64 KiB, ibv_uc_pingpong,
# ibv_srq_pingpong, ibv_ud_pingpong 1 KiB, and perftest ib_send_lat (RC, UC),
# ib_send_bw 64 KiB, ib_write_lat/ib_read_lat 8 B, ib_write_bw/ib_read_bw
# 64 KiB, ib_atomic_lat and ib_atomic_bw.
#   verbs_two_hosts.sh LIBDIR
source "$(dirname "$0")/lib.sh"
libdir=$1
for tool in ibv_rc_pingpong ib_send_lat; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed (Debian: ibverbs-utils, perftest)"
done
sr_hosts_two

tcp_port=$((20000 + $$ % 20000))
# pair NAME PORT_OPTION PROGRAM ARGS...: server on b, client on a.
pair() {
  local name=$1 port_option=$2
  shift 2
  tcp_port=$((tcp_port + 1))
  sr_on_bg b env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" "$port_option" "$tcp_port" \
    >"$SR_DIR/server.out" 2>&1
  local server=$SR_PID client_status=0
  sr_wait_tcp_port b "$tcp_port"
  sr_on a env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" "$port_option" "$tcp_port" "$(sr_ipv4 b)" \
    >"$SR_DIR/client.out" 2>&1 || client_status=$?
  sr_finish_pair "$name" "$client_status" "$server"
  echo "ok: $name: $(grep -E 'iters in|^ [0-9]+ +[0-9]+' "$SR_DIR/client.out" | tail -1)"
}

for size in 1 4096 65536; do
  pair "ibv_rc_pingpong --chk -s $size" -p ibv_rc_pingpong -g 0 -n 100 -s "$size" --chk
done
pair ibv_uc_pingpong -p ibv_uc_pingpong -g 0 -n 100 -s 4096
pair ibv_srq_pingpong -p ibv_srq_pingpong -g 0 -n 100 -s 4096
pair ibv_ud_pingpong -p ibv_ud_pingpong -g 0 -n 100 -s 1024
pair "ib_send_lat RC" -p ib_send_lat -x 0 -s 8 -n 1000
pair "ib_send_lat UC" -p ib_send_lat -x 0 -s 8 -n 1000 -c UC
pair "ib_send_bw 64 KiB" -p ib_send_bw -x 0 -s 65536 -n 200
# 200 iterations, not 1000: each side of ib_write_lat spins on its memory for
# the peer's WRITE, which its progress thread takes at the end of a watch
# window (up to 16 ms, kAppPollingMaxTickNs) whenever the watch has left the
# port alone (Engine::WatchRocePort: the application's own polls for its
# ACKs count as takes). At nice 19 under load 12-19 that was 8 ms per
# iteration and 30 s ran out in 8 of 15 runs; 200 x 2 windows of 16 ms is
# 6.4 s, a fifth of the timeout, the worst case the design allows.
pair "ib_write_lat" -p ib_write_lat -x 0 -s 8 -n 200
pair "ib_write_bw 64 KiB" -p ib_write_bw -x 0 -s 65536 -n 200
pair "ib_read_lat" -p ib_read_lat -x 0 -s 8 -n 1000
pair "ib_read_bw 64 KiB" -p ib_read_bw -x 0 -s 65536 -n 200
pair "ib_atomic_lat" -p ib_atomic_lat -x 0 -n 1000
pair "ib_atomic_bw" -p ib_atomic_bw -x 0 -n 1000
echo "PASS"
