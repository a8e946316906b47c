#!/usr/bin/env bash
# softrdma demo: install what is missing, build, then run Debian's unmodified
# ibv_rc_pingpong as two processes on this host over softrdma0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== 1/4 Dependencies and build"
bash scripts/install-deps.sh
bash scripts/build.sh

# Shared with the interop tests: a private SOFTRDMA_NAMESPACE, cleanup on exit
# (our processes by PID, the namespace's /dev/shm objects), deadlines.
# shellcheck source=tests/interop/lib.sh
source tests/interop/lib.sh
SOFTRDMA_TEST_LIB_DIR=$PWD/build/lib
sr_init demo inherit
sr_need_tool ibv_rc_pingpong ibverbs-utils

echo
echo "== 2/4 The device, as rdma-core's own tools see it (LD_LIBRARY_PATH=build/lib)"
echo "\$ ibv_devices"
sr_run ibv_devices || sr_fail "ibv_devices failed: is build/lib/libibverbs.so.1 softrdma's?"
sr_gid_index
echo "\$ ibv_devinfo -v   (port state and GID table)"
grep -E 'hca_id|port:|state:|link_layer|GID\[' "$SR_TMP/devinfo-gid.txt" || true

echo
echo "== 3/4 ibv_rc_pingpong: a server and a client, two separate processes"
sr_pingpong -g "$SR_GID"

echo
echo "== 4/4 What happened"
if ((SR_SERVER_RC != 0 || SR_CLIENT_RC != 0)); then
  echo "The pingpong FAILED: server exit code $SR_SERVER_RC, client exit code $SR_CLIENT_RC."
  echo "Run again with SOFTRDMA_LOG=debug for the library's view."
  exit 1
fi
bytes=$(sr_first "$SR_CLIENT_OUT" '^([0-9]+) bytes in .*')
mbit=$(sr_first "$SR_CLIENT_OUT" '.* seconds = ([^ ]+) Mbit/sec$')
iters=$(sr_first "$SR_CLIENT_OUT" '^([0-9]+) iters in .*')
secs=$(sr_first "$SR_CLIENT_OUT" '^[0-9]+ iters in ([^ ]+) seconds.*')
usec=$(sr_first "$SR_CLIENT_OUT" '.* = ([^ ]+) usec/iter$')
cat <<TEXT
Two separate processes, a server and a client, each opened the device
softrdma0 and created an RC (reliable connected) queue pair: QPN $(sr_qpn "$SR_SERVER_OUT" local)
in the server, QPN $(sr_qpn "$SR_CLIENT_OUT" local) in the client. They exchanged their QPN, PSN and GID
($SR_LOOPBACK_GID, GID index $SR_GID) over an ordinary TCP connection on port $SR_PORT,
moved their QPs to RTR and RTS, and then ping-ponged $iters messages each way with
RDMA SEND/RECV through softrdma's shared-memory wire: $bytes bytes in
$secs s, that is $mbit Mbit/s and $usec microseconds per round trip, as the
client reported. Data path: $([[ "${SOFTRDMA_CMA:-}" == 0 ]] && echo "two-copy (SOFTRDMA_CMA=0)" || echo "default (one copy by cross-memory attach where the kernel allows it)").
No RDMA hardware and no kernel RDMA module took part: these are Debian's
unmodified binaries, pointed at build/lib by LD_LIBRARY_PATH.
TEXT
