# Test hosts made of network namespaces, for the RoCE wire's tests.
#
#   source lib.sh
#   sr_host_one             # host a alone: a veth pair a0 <-> a1, both in it
#   sr_hosts_two            # hosts a, b: one veth pair a0 <-> b0
#   sr_hosts_three          # hosts a, b, c: each a veth into a bridge (in its own namespace)
#   sr_on a CMD...          # runs CMD on host a (foreground)
#   sr_on_bg a CMD...       # the same in the background; its PID is in $SR_PID
#
# Host h has its own network namespace with lo and one interface h0
# (192.0.2.<n>/24 and fd00:5f::<n>/64, n = 1, 2, 3 for a, b, c; MTU $SR_MTU),
# and its own mount namespace whose /dev/shm is an empty tmpfs: programs of
# one host share memory as on one machine, and nothing passes through
# memory between hosts. Only documentation addresses (RFC 5737) and a ULA
# prefix are used, inside namespaces we create: the host's own network is
# never touched. Everything (namespaces, interfaces, the processes started
# with sr_on_bg, files) is removed at exit by a trap. Without root, or without
# ip/unshare/nsenter, the script exits 77 (ctest's skip) with a message.
set -euo pipefail

sr_skip() {
  echo "SKIP: $*"
  exit 77
}

sr_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $(id -u) -eq 0 ]] || sr_skip "network namespaces need root (run ctest as root to test across hosts)"
for tool in ip unshare nsenter mount; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed (Debian: iproute2, util-linux, mount)"
done

# Short names: interface names are at most 15 characters.
SR_ID="sr$$"
SR_DIR=$(mktemp -d "/tmp/softrdma-netns.XXXXXX")
SR_HOSTS=()
SR_PIDS=()
SR_SWITCH=""
# The links' MTU. 9000 (jumbo frames, as RoCE fabrics use) by default, so
# 4096-byte packets fit; the port's active_mtu follows the links the RoCE
# wire uses (docs/design.md "The port's MTU", test netns.port_mtu).
SR_MTU=${SR_MTU:-9000}

# Every process in the network namespaces of our hosts: ours, started there
# by this script, directly or not (a child of `timeout` outlives the SIGKILL
# of `timeout`, which cannot pass it on).
sr_host_pids() {
  local h
  for h in "${SR_HOSTS[@]}"; do
    ip netns pids "$(sr_netns "$h")" 2>/dev/null || true
  done
}

sr_cleanup() {
  local pid h
  for pid in "${SR_PIDS[@]}" $(sr_host_pids); do
    kill -9 "$pid" 2>/dev/null || true
  done
  for pid in "${SR_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  # The others are not our children: wait for them to go (2 s at most),
  # since one may hold a file open in $SR_DIR.
  local left
  for _ in $(seq 40); do
    mapfile -t left < <(sr_host_pids)
    [[ ${#left[@]} -gt 0 ]] || break
    kill -9 "${left[@]}" 2>/dev/null || true
    sleep 0.05
  done
  for h in "${SR_HOSTS[@]}"; do
    umount "$SR_DIR/$h.mnt" 2>/dev/null || true
    ip netns del "${SR_ID}$h" 2>/dev/null || true
  done
  [[ -z $SR_SWITCH ]] || ip netns del "$SR_SWITCH" 2>/dev/null || true
  # Lazily if still busy (a process we could not end): the directory can
  # then go, and the mount with the last user.
  umount "$SR_DIR" 2>/dev/null || umount -l "$SR_DIR" 2>/dev/null || true
  rm -rf "$SR_DIR"
}
trap sr_cleanup EXIT
trap 'exit 130' INT TERM

# The mount namespaces are kept as bind mounts of files in SR_DIR, which must
# therefore be a private mount point.
mount --bind "$SR_DIR" "$SR_DIR"
mount --make-private "$SR_DIR"

sr_host_number() {
  case $1 in a) echo 1 ;; b) echo 2 ;; c) echo 3 ;; *) sr_fail "unknown host $1" ;; esac
}
sr_ipv4() { echo "192.0.2.$(sr_host_number "$1")"; }
sr_ipv6() { echo "fd00:5f::$(sr_host_number "$1")"; }
sr_netns() { echo "${SR_ID}$1"; }

# A host: its network namespace (lo up) and its mount namespace with a
# private /dev/shm.
sr_add_host() {
  local h=$1
  ip netns add "$(sr_netns "$h")"
  SR_HOSTS+=("$h")
  ip -n "$(sr_netns "$h")" link set lo up
  touch "$SR_DIR/$h.mnt"
  unshare --mount="$SR_DIR/$h.mnt" --propagation private \
    mount -t tmpfs -o mode=1777,size=512m "softrdma-$h-shm" /dev/shm
}

# Gives host h its address on h0 (already in its namespace) and brings it up.
sr_address_host() {
  local h=$1 ns
  ns=$(sr_netns "$h")
  ip -n "$ns" addr add "$(sr_ipv4 "$h")/24" dev "${h}0"
  ip -n "$ns" addr add "$(sr_ipv6 "$h")/64" dev "${h}0" nodad
  ip -n "$ns" link set "${h}0" mtu "$SR_MTU" up
}

# One host (users of one machine): a0 with its addresses, its veth peer a1
# up in the same namespace (so a0 is up and its addresses usable).
sr_host_one() {
  sr_add_host a
  ip -n "$(sr_netns a)" link add a0 type veth peer name a1
  ip -n "$(sr_netns a)" link set a1 mtu "$SR_MTU" up
  sr_address_host a
}

sr_hosts_two() {
  sr_add_host a
  sr_add_host b
  ip link add "${SR_ID}x" type veth peer name "${SR_ID}y"
  ip link set "${SR_ID}x" netns "$(sr_netns a)" name a0
  ip link set "${SR_ID}y" netns "$(sr_netns b)" name b0
  sr_address_host a
  sr_address_host b
}

sr_hosts_three() {
  SR_SWITCH="${SR_ID}sw"
  ip netns add "$SR_SWITCH"
  ip -n "$SR_SWITCH" link add br0 type bridge
  ip -n "$SR_SWITCH" link set br0 up
  local h
  for h in a b c; do
    sr_add_host "$h"
    ip link add "${SR_ID}$h" type veth peer name "${SR_ID}p$h"
    ip link set "${SR_ID}$h" netns "$(sr_netns "$h")" name "${h}0"
    ip link set "${SR_ID}p$h" netns "$SR_SWITCH" name "p$h"
    ip -n "$SR_SWITCH" link set "p$h" master br0 up
    sr_address_host "$h"
  done
}

# Runs a command on host h: its network and mount namespaces.
sr_on() {
  local h=$1
  shift
  nsenter --net="/run/netns/$(sr_netns "$h")" --mount="$SR_DIR/$h.mnt" -- "$@"
}

# Started as a simple command (not a function) so that $! is the program's
# own PID (nsenter execs it), which is what a test may signal.
sr_on_bg() {
  local h=$1
  shift
  nsenter --net="/run/netns/$(sr_netns "$h")" --mount="$SR_DIR/$h.mnt" -- "$@" &
  SR_PID=$!
  SR_PIDS+=("$SR_PID")
}

# Waits for the background command with PID $1; returns its exit status.
sr_wait() {
  local status=0
  wait "$1" || status=$?
  return "$status"
}

# sr_finish_pair NAME CLIENT_STATUS SERVER_PID: waits for the server of a
# client/server pair, and fails with both outputs ($SR_DIR/client.out and
# server.out) unless both sides exited 0.
sr_finish_pair() {
  local name=$1 client_status=$2 server=$3 server_status=0
  sr_wait "$server" || server_status=$?
  if ((client_status != 0 || server_status != 0)); then
    echo "--- client:" >&2
    cat "$SR_DIR/client.out" >&2
    echo "--- server:" >&2
    cat "$SR_DIR/server.out" >&2
    sr_fail "$name: client exit $client_status, server exit $server_status"
  fi
}

# Waits up to 5 s until host h has a UDP socket on port $2.
sr_wait_udp_port() {
  local h=$1 port=$2 i
  for ((i = 0; i < 100; i++)); do
    if sr_on "$h" ss -Hlun "sport = :$port" | grep -q .; then return 0; fi
    sleep 0.05
  done
  sr_fail "no UDP socket on port $port on host $h after 5 s"
}

# Waits up to 10 s until host h listens on TCP port $2 (the out-of-band
# exchange of ibv_*_pingpong and perftest servers): a client started earlier
# fails at once with "Couldn't connect".
sr_wait_tcp_port() {
  local h=$1 port=$2 i
  for ((i = 0; i < 200; i++)); do
    if sr_on "$h" ss -Hltn "sport = :$port" | grep -q .; then return 0; fi
    sleep 0.05
  done
  sr_fail "nothing listens on TCP port $port on host $h after 10 s"
}

# The slack, in ms, that a RoCE survivor's RETRY_EXC_ERR may come after
# timeout x (retry_cnt + 1) (rc_peer_death.sh, rc_link_down.sh). The timer
# itself is not late (each try is due one timeout after the previous one
# was due: docs/design.md "RoCEv2 transport", Survivors); what remains is
# scheduling: the progress thread's wake-up for the last expiry and the
# survivor's poll that takes the completion, 0-6 ms at niceness 0 next to
# builds at nice 19 (load 4-7), so 60 ms at niceness 0, as in CI. At a
# positive niceness next to work of niceness 0 a process gets a sliver of a
# CPU (wake-ups seen 60-250 ms late, each lateness beyond an eighth of a
# timeout adding up), which measures the scheduler, not the transport: 2 s there,
# and the test says so.
sr_retry_bound_slack_ms() {
  if (($(nice) > 0)); then
    echo "niceness $(nice): the bound is checked with a slack of 2000 ms, not 60" >&2
    echo 2000
  else
    echo 60
  fi
}
