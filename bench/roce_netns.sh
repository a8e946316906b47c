#!/usr/bin/env bash
# The RoCE wire against the kernel's own transports on the same veth pair
# (issue 12's bench), between two hosts made of network namespaces
# (tests/netns/lib.sh; needs root), each measurement repeated --repeat times:
#   - bandwidth: iperf3 single-stream TCP (3 s) against ib_write_bw -s 65536
#     (and ib_send_bw -s 65536);
#   - latency: a UDP ping-pong of 8-byte RoCE packets (softrdma_roce_probe,
#     one outstanding, kernel UDP sockets only, blocking in poll()) against
#     ib_send_lat -s 8 (perftest reports half the round trip: compared with
#     half of the UDP one);
#   - CPU time (user + system, both ends, from /usr/bin/time) per GB moved.
#     perftest busy-polls both ends, iperf3 sleeps in the kernel: the RoCE
#     figure includes the polling. perftest also spends ~0.22 s of CPU at
#     start measuring the CPU clock (a gettimeofday loop), whatever it then
#     moves: the bandwidth runs move --iters x 64 KiB (default 100,000, 6.6 GB,
#     ~3 s like iperf3's) so that this costs ~0.03 s per GB, not the 0.67 of
#     the 5,000 messages measured before (docs/performance.md).
# Prints a table of medians [min-max]; with --out DIR also writes DIR/report.md
# (commit, load average before and after, the table) and DIR/raw/.
# Numbers are noisy on a shared 2-vCPU VM: hold the bench lock
# (flock LOCKFILE ...) where other people measure.
#   bench/roce_netns.sh [BUILD_DIR] [--out DIR] [--repeat N] [--mtu M] [--iters N] [--commit ID]
# (--commit names the commit BUILD_DIR was built from, when not this checkout's.)
build_arg=build
commit=
out_dir=""
repeat=3
mtu=9000
bw_iters=100000
while (($#)); do
  case $1 in
    --out) out_dir=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --iters) bw_iters=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    *) build_arg=$1; shift ;;
  esac
done
SR_MTU=$mtu
source "$(dirname "$0")/../tests/netns/lib.sh"
build=$(cd "$build_arg" && pwd)
lib=$build/lib
probe=$build/bin/softrdma_roce_probe
# The kernel's side of the comparison (iperf3) is not a test dependency:
# install it here when missing, as bench/run.sh does for its tools.
bash "$(dirname "$0")/install_tools.sh" /dev/stderr iperf3 perftest
for tool in iperf3 ib_write_bw ib_send_bw ib_send_lat /usr/bin/time python3; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed"
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
sr_hosts_two
server_ip=$(sr_ipv4 b)
raw=$SR_DIR/raw
mkdir -p "$raw"

cpu_of() { awk '{ s += $1 + $2 } END { printf "%.3f", s }' "$@"; }  # files of "user sys"
per_gb() { awk -v c="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", c / (b / 1e9); else print "nan" }'; }

# Each measure appends "value" lines to $SR_DIR/<name>.values.
record() { echo "$2" >>"$SR_DIR/$1.values"; }

tcp_run() {  # r
  local r=$1 server
  sr_on_bg b /usr/bin/time -f "%U %S" -o "$raw/tcp_server.$r.cpu" iperf3 -s -1 -p 5201 >/dev/null 2>&1
  server=$SR_PID
  sr_wait_tcp_port b 5201
  sr_on a /usr/bin/time -f "%U %S" -o "$raw/tcp_client.$r.cpu" iperf3 -c "$server_ip" -p 5201 -t 3 -J \
    >"$raw/iperf3.$r.json" || true
  sr_wait "$server" || true
  local bytes gbps
  bytes=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"]))' "$raw/iperf3.$r.json" 2>/dev/null || echo 0)
  gbps=$(python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9))' "$raw/iperf3.$r.json" 2>/dev/null || echo nan)
  record tcp_gbps "$gbps"
  record tcp_cpu_per_gb "$(per_gb "$(cpu_of "$raw/tcp_server.$r.cpu" "$raw/tcp_client.$r.cpu")" "$bytes")"
}

# rdma_bw NAME TOOL PORT r: 64 KiB, $bw_iters iterations.
rdma_bw() {
  local name=$1 tool=$2 port=$3 r=$4 iters=$bw_iters server
  sr_on_bg b env LD_LIBRARY_PATH="$lib" /usr/bin/time -f "%U %S" -o "$raw/$name.server.$r.cpu" \
    "$tool" -x 0 -s 65536 -n $iters -p "$port" >"$raw/$name.server.$r.out" 2>&1
  server=$SR_PID
  sr_wait_tcp_port b "$port"
  sr_on a env LD_LIBRARY_PATH="$lib" /usr/bin/time -f "%U %S" -o "$raw/$name.client.$r.cpu" \
    "$tool" -x 0 -s 65536 -n $iters -p "$port" "$server_ip" >"$raw/$name.client.$r.out" 2>&1 || true
  sr_wait "$server" || true
  local mbps
  mbps=$(awk '$1 == 65536 { print $4 }' "$raw/$name.client.$r.out" | tail -1)
  if [[ -z $mbps ]]; then
    echo "$tool failed (run $r):" >&2
    tail -3 "$raw/$name.client.$r.out" "$raw/$name.server.$r.out" >&2
    record "${name}_gbps" nan
    record "${name}_cpu_per_gb" nan
    return
  fi
  record "${name}_gbps" "$(awk -v m="$mbps" 'BEGIN { printf "%.2f", m * 8 * 1048576 / 1e9 }')"
  record "${name}_cpu_per_gb" "$(per_gb "$(cpu_of "$raw/$name.server.$r.cpu" "$raw/$name.client.$r.cpu")" $((iters * 65536)))"
}

udp_pingpong() {  # r
  local r=$1 server out rtt
  sr_on_bg b "$probe" serve --bind "$server_ip" --count 20000 >/dev/null
  server=$SR_PID
  sr_wait_udp_port b 4791
  out=$(sr_on a "$probe" ping --bind "$(sr_ipv4 a)" --to "$server_ip" --count 20000 --size 8 --window 1) || true
  sr_wait "$server" || true
  echo "$out" >"$raw/udp_pingpong.$r.out"
  rtt=$(sed -n 's/.*median \([0-9.]*\) us.*/\1/p' <<<"$out")
  record udp_oneway_us "$(awk -v r="${rtt:-nan}" 'BEGIN { printf "%.2f", r / 2 }')"
}

send_lat() {  # r
  local r=$1 server
  sr_on_bg b env LD_LIBRARY_PATH="$lib" ib_send_lat -x 0 -s 8 -n 20000 -p 18601 >"$raw/send_lat.server.$r.out" 2>&1
  server=$SR_PID
  sr_wait_tcp_port b 18601
  sr_on a env LD_LIBRARY_PATH="$lib" ib_send_lat -x 0 -s 8 -n 20000 -p 18601 "$server_ip" \
    >"$raw/send_lat.client.$r.out" 2>&1 || true
  sr_wait "$server" || true
  local typical
  typical=$(awk '$1 == 8 { print $5 }' "$raw/send_lat.client.$r.out" | tail -1)
  record send_lat_us "${typical:-nan}"
}

for ((r = 1; r <= repeat; r++)); do
  tcp_run "$r"
  rdma_bw write_bw ib_write_bw 18600 "$r"
  rdma_bw send_bw ib_send_bw 18602 "$r"
  udp_pingpong "$r"
  send_lat "$r"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# median [min-max] of a measure; "median" alone with --plain.
summary() {
  python3 - "$SR_DIR/$1.values" "${2:-}" <<'EOF'
import math, statistics, sys
v = [float(x) for x in open(sys.argv[1]) if x.strip() and x.strip() != "nan"]
if not v:
    print("nan")
elif sys.argv[2] == "plain":
    print("%.2f" % statistics.median(v))
else:
    print("%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v)))
EOF
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2fx", a / b }'; }

[[ -n $commit ]] || commit=$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)
table=$(
  echo "| measure (veth pair between two namespaces, MTU $SR_MTU; median [min-max] of $repeat; perftest bw: $bw_iters x 64 KiB) | kernel | softrdma RoCE | ratio (goal) |"
  echo "|---|---|---|---|"
  echo "| bandwidth Gb/s: iperf3 TCP 1 stream / ib_write_bw -s 65536 | $(summary tcp_gbps) | $(summary write_bw_gbps) | $(ratio "$(summary write_bw_gbps plain)" "$(summary tcp_gbps plain)") (1.5x) |"
  echo "| bandwidth Gb/s: iperf3 TCP 1 stream / ib_send_bw -s 65536 | $(summary tcp_gbps) | $(summary send_bw_gbps) | $(ratio "$(summary send_bw_gbps plain)" "$(summary tcp_gbps plain)") |"
  echo "| CPU s per GB, both ends (user+sys): TCP / ib_write_bw | $(summary tcp_cpu_per_gb) | $(summary write_bw_cpu_per_gb) | $(ratio "$(summary write_bw_cpu_per_gb plain)" "$(summary tcp_cpu_per_gb plain)") |"
  echo "| CPU s per GB, both ends (user+sys): TCP / ib_send_bw | $(summary tcp_cpu_per_gb) | $(summary send_bw_cpu_per_gb) | $(ratio "$(summary send_bw_cpu_per_gb plain)" "$(summary tcp_cpu_per_gb plain)") |"
  echo "| 8 B one-way us: UDP ping-pong RTT/2 / ib_send_lat -s 8 typical | $(summary udp_oneway_us) | $(summary send_lat_us) | $(ratio "$(summary send_lat_us plain)" "$(summary udp_oneway_us plain)") (<= 1.2x) |"
)
echo
echo "$table"
echo "commit $commit; load average $load_before (start), $load_after (end); $(nproc) CPUs"
if [[ -n $out_dir ]]; then
  mkdir -p "$out_dir"
  cp -r "$raw" "$out_dir/"
  {
    echo "# RoCE wire against kernel TCP/UDP on one veth pair (bench/roce_netns.sh)"
    echo
    echo "commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r)"
    echo "load average at start $load_before, at end $load_after"
    echo
    echo "$table"
  } >"$out_dir/report.md"
  echo "written: $out_dir/report.md"
fi
