#!/usr/bin/env bash
# netns.perftest_uc_ud_two_hosts: the perftest transports that
# verbs_two_hosts.sh does not run, between two hosts (network namespaces on
# a veth pair, each with its own /dev/shm: only RoCEv2 over UDP joins them),
# each pair checked by its exit status: ib_send_lat and ib_send_bw over UD
# (-c UD, 1 KiB: one datagram each), ib_send_bw over UC (4 KiB and 64 KiB),
# ib_write_lat and ib_write_bw (64 KiB) over UC (-c UC). UC never resends: a
# message lost is lost, and ib_send_bw's server waits for all of its
# receives. Its 200 x 64 KiB burst fits the receive buffer the port asks
# for as root (32 MiB, docs/design.md "The port"); with 4 MiB the server's
# socket overflowed and it waited until its timeout.
#   perftest_uc_ud_two_hosts.sh LIBDIR
source "$(dirname "$0")/lib.sh"
libdir=$1
for tool in ib_send_lat ib_send_bw ib_write_lat ib_write_bw; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed (Debian: perftest)"
done
sr_hosts_two

tcp_port=$((20000 + ($$ + 7919) % 20000))
# pair NAME PROGRAM ARGS...: server on b, client on a (perftest's -p port).
pair() {
  local name=$1
  shift
  tcp_port=$((tcp_port + 1))
  sr_on_bg b env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" -p "$tcp_port" \
    >"$SR_DIR/server.out" 2>&1
  local server=$SR_PID client_status=0
  sr_wait_tcp_port b "$tcp_port"
  sr_on a env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" -p "$tcp_port" "$(sr_ipv4 b)" \
    >"$SR_DIR/client.out" 2>&1 || client_status=$?
  sr_finish_pair "$name" "$client_status" "$server"
  echo "ok: $name: $(grep -E '^ [0-9]+ +[0-9]+' "$SR_DIR/client.out" | tail -1)"
}

pair "ib_send_lat UD 1 KiB" ib_send_lat -x 0 -c UD -s 1024 -n 1000
pair "ib_send_bw UD 1 KiB" ib_send_bw -x 0 -c UD -s 1024 -n 1000
pair "ib_send_bw UC 4 KiB" ib_send_bw -x 0 -c UC -s 4096 -n 200
pair "ib_send_bw UC 64 KiB" ib_send_bw -x 0 -c UC -s 65536 -n 200
pair "ib_write_lat UC" ib_write_lat -x 0 -c UC -s 8 -n 1000
pair "ib_write_bw UC 64 KiB" ib_write_bw -x 0 -c UC -s 65536 -n 200
echo "PASS"
