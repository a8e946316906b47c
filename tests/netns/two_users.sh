#!/usr/bin/env bash
# netns.two_users: two users on one host, as on a machine with a RoCE NIC.
# On a host of its own (a network namespace with its own /dev/shm), a
# process of root and one of uid 65534 (nobody), each with its own registry
# and QPN range, talk over the RoCEv2 wire through the host's address:
# unmodified ibv_rc_pingpong -g 0 --chk both ways (root server, nobody
# client, then the reverse) and ib_write_bw (both ways); then
# softrdma_cross_user_probe, run as nobody against a root server, finds
# root's shared memory and process memory closed, a WRITE and a READ with a
# wrong rkey (and a WRITE past the MR) ending in REM_ACCESS_ERR, and only
# the rkey root handed out opening its buffer. Root only; skipped without
# setpriv or where nobody cannot read the build tree.
#   two_users.sh LIBDIR PROBE
source "$(dirname "$0")/lib.sh"
libdir=$1
probe=$2
for tool in ibv_rc_pingpong ib_write_bw setpriv; do
  command -v "$tool" >/dev/null 2>&1 ||
    sr_skip "$tool is not installed (Debian: ibverbs-utils, perftest, util-linux)"
done
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${as_nobody[@]}" test -r "$libdir/libibverbs.so.1" -a -x "$probe" ||
  sr_skip "uid 65534 cannot read the build tree ($libdir): build where every user can read"
sr_host_one
address=$(sr_ipv4 a)

tcp_port=$((20000 + $$ % 20000))
# pair NAME SERVER_USER CLIENT_USER PORT_OPTION PROGRAM ARGS...: both on host a;
# USER is root or nobody.
pair() {
  local name=$1 server_user=$2 client_user=$3 port_option=$4
  shift 4
  tcp_port=$((tcp_port + 1))
  local server_as=() client_as=()
  [[ $server_user == nobody ]] && server_as=("${as_nobody[@]}")
  [[ $client_user == nobody ]] && client_as=("${as_nobody[@]}")
  sr_on_bg a "${server_as[@]}" env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" \
    "$port_option" "$tcp_port" >"$SR_DIR/server.out" 2>&1
  local server=$SR_PID client_status=0 server_status=0
  sr_wait_tcp_port a "$tcp_port"
  sr_on a "${client_as[@]}" env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" \
    "$port_option" "$tcp_port" "$address" >"$SR_DIR/client.out" 2>&1 || client_status=$?
  sr_wait "$server" || server_status=$?
  if ((client_status != 0 || server_status != 0)); then
    echo "--- client ($client_user):" >&2
    cat "$SR_DIR/client.out" >&2
    echo "--- server ($server_user):" >&2
    cat "$SR_DIR/server.out" >&2
    sr_fail "$name: client exit $client_status, server exit $server_status"
  fi
  echo "ok: $name, server $server_user, client $client_user:" \
    "$(grep -E 'iters in|^ [0-9]+ +[0-9]+' "$SR_DIR/client.out" | tail -1)"
}

for users in "root nobody" "nobody root"; do
  read -r server_user client_user <<<"$users"
  pair "ibv_rc_pingpong -g 0 --chk" "$server_user" "$client_user" \
    -p ibv_rc_pingpong -g 0 -n 100 -s 4096 --chk
  # Each user's QPs are of its registry's range (slot = uid mod 127: root
  # 0x00xxxx, nobody 65534 -> slot 2, 0x04xxxx), as ibv_rc_pingpong prints.
  for side in server client; do
    user=${side}_user
    want=0x00
    [[ ${!user} == nobody ]] && want=0x04
    grep -q "local address: .*QPN $want" "$SR_DIR/$side.out" ||
      sr_fail "the $side (${!user}) has a QPN outside its range $want: $(grep 'local address' "$SR_DIR/$side.out")"
  done
  pair "ib_write_bw 64 KiB" "$server_user" "$client_user" \
    -p ib_write_bw -x 0 -s 65536 -n 200
done

tcp_port=$((tcp_port + 1))
sr_on_bg a timeout 60 "$probe" server "$tcp_port" >"$SR_DIR/server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port a "$tcp_port"
client_status=0 server_status=0
sr_on a "${as_nobody[@]}" env LD_LIBRARY_PATH="$libdir" timeout 60 "$probe" client "$address" \
  "$tcp_port" >"$SR_DIR/client.out" 2>&1 || client_status=$?
sr_wait "$server" || server_status=$?
sed 's/^/  nobody: /' "$SR_DIR/client.out"
sed 's/^/  root: /' "$SR_DIR/server.out"
((client_status == 0 && server_status == 0)) ||
  sr_fail "cross_user_probe: client (nobody) exit $client_status, server (root) exit $server_status"

# Both users' registries were made on this host's /dev/shm; they go with it
# (the trap unmounts it), and nothing of theirs may be left running.
sr_on a sh -c 'rm -f /dev/shm/softrdma-*'
echo "PASS"
