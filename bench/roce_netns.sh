#!/usr/bin/env bash
# The RoCE wire against the kernel's own transports on the same veth pair
# (issue 12's bench pieces), between two hosts made of network namespaces
# (tests/netns/lib.sh; needs root):
#   - bandwidth: iperf3 single-stream TCP (5 s) against ib_send_bw -s 65536
#     (ib_write_bw does not pass across hosts yet);
#   - latency: a UDP ping-pong of 8-byte RoCE packets (softrdma_roce_probe,
#     one outstanding, kernel UDP sockets only) against ib_send_lat -s 8
#     (perftest reports half the round trip: compared with half of the UDP one);
#   - CPU time (user + system, both ends, from /usr/bin/time) per GB moved.
# One run, printed as a table; numbers are noisy on a shared 2-vCPU VM.
#   bench/roce_netns.sh BUILD_DIR
source "$(dirname "$0")/../tests/netns/lib.sh"
build=$(cd "${1:-build}" && pwd)
lib=$build/lib
probe=$build/bin/softrdma_roce_probe
for tool in iperf3 ib_send_bw ib_send_lat /usr/bin/time; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed"
done
sr_hosts_two
server_ip=$(sr_ipv4 b)

cpu_of() { awk '{ s += $1 + $2 } END { printf "%.2f", s }' "$@"; }  # files of "user sys"

# iperf3: 5 s single stream.
sr_on_bg b /usr/bin/time -f "%U %S" -o "$SR_DIR/tcp_server.cpu" iperf3 -s -1 -p 5201 >/dev/null 2>&1
server=$SR_PID
sr_wait_tcp_port b 5201
sr_on a /usr/bin/time -f "%U %S" -o "$SR_DIR/tcp_client.cpu" iperf3 -c "$server_ip" -p 5201 -t 5 -J \
  >"$SR_DIR/iperf3.json"
sr_wait "$server" || true
tcp_bytes=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(int(d["end"]["sum_received"]["bytes"]))' "$SR_DIR/iperf3.json")
tcp_gbps=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))' "$SR_DIR/iperf3.json")
tcp_cpu=$(cpu_of "$SR_DIR/tcp_server.cpu" "$SR_DIR/tcp_client.cpu")

# ib_send_bw 64 KiB.
iters=5000
sr_on_bg b env LD_LIBRARY_PATH="$lib" /usr/bin/time -f "%U %S" -o "$SR_DIR/rdma_server.cpu" \
  ib_send_bw -x 0 -s 65536 -n $iters -p 18600 >"$SR_DIR/send_bw_server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port b 18600
sr_on a env LD_LIBRARY_PATH="$lib" /usr/bin/time -f "%U %S" -o "$SR_DIR/rdma_client.cpu" \
  ib_send_bw -x 0 -s 65536 -n $iters -p 18600 "$server_ip" >"$SR_DIR/send_bw.out" 2>&1 || true
sr_wait "$server" || true
[[ -n $(awk '$1 == 65536' "$SR_DIR/send_bw.out") ]] || { echo "ib_send_bw failed:"; tail -5 "$SR_DIR/send_bw.out" "$SR_DIR/send_bw_server.out"; }
rdma_mbps=$(awk '$1 == 65536 { print $4 }' "$SR_DIR/send_bw.out" | tail -1)
rdma_gbps=$(awk -v m="${rdma_mbps:-0}" 'BEGIN { printf "%.2f", m * 8 * 1048576 / 1e9 }')
rdma_cpu=$(cpu_of "$SR_DIR/rdma_server.cpu" "$SR_DIR/rdma_client.cpu")
rdma_bytes=$((iters * 65536))

# UDP ping-pong of 8-byte RoCE packets, one outstanding.
sr_on_bg b "$probe" serve --bind "$server_ip" --count 20000 >/dev/null
server=$SR_PID
sr_wait_udp_port b 4791
udp=$(sr_on a "$probe" ping --bind "$(sr_ipv4 a)" --to "$server_ip" --count 20000 --size 8 --window 1)
sr_wait "$server" || true
udp_rtt=$(sed -n 's/.*median \([0-9.]*\) us.*/\1/p' <<<"$udp")

# ib_send_lat 8 B.
sr_on_bg b env LD_LIBRARY_PATH="$lib" ib_send_lat -x 0 -s 8 -n 20000 -p 18601 >/dev/null 2>&1
server=$SR_PID
sr_wait_tcp_port b 18601
sr_on a env LD_LIBRARY_PATH="$lib" ib_send_lat -x 0 -s 8 -n 20000 -p 18601 "$server_ip" \
  >"$SR_DIR/send_lat.out" 2>&1 || true
sr_wait "$server" || true
lat_typical=$(awk '$1 == 8 { print $5 }' "$SR_DIR/send_lat.out" | tail -1)

per_gb() { awk -v c="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", c / (b / 1e9); else print "n/a" }'; }
echo
echo "| measure (veth pair between two namespaces, MTU $SR_MTU) | kernel | softrdma RoCE | ratio |"
echo "|---|---|---|---|"
echo "| bandwidth: iperf3 TCP 1 stream / ib_send_bw -s 65536 (Gb/s) | $tcp_gbps | $rdma_gbps | $(awk -v a="$rdma_gbps" -v b="$tcp_gbps" 'BEGIN { printf "%.2fx", a / b }') |"
echo "| CPU s per GB (both ends, user+sys) | $(per_gb "$tcp_cpu" "$tcp_bytes") | $(per_gb "$rdma_cpu" "$rdma_bytes") | |"
echo "| 8 B one-way: UDP ping-pong RTT/2 / ib_send_lat typical (us) | $(awk -v r="$udp_rtt" 'BEGIN { printf "%.1f", r / 2 }') | $lat_typical | $(awk -v r="$udp_rtt" -v l="$lat_typical" 'BEGIN { printf "%.2fx", l / (r / 2) }') |"
