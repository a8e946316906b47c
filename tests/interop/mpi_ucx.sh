#!/usr/bin/env bash
# Open MPI over UCX over softrdma: our own MPI program (tests/mpi/mpi_exchange.c:
# a blocking ring, 1 MiB non-blocking to every other rank with every byte
# checked, broadcast, allreduce, barrier) with N ranks on this host, started
# by Debian's mpirun under `softrdma run`, with `--mca pml ucx` and UCX held
# to softrdma (UCX_NET_DEVICES=softrdma0:1, UCX_TLS=rc_verbs,ud_verbs: no
# shared-memory transport of UCX's own). mpirun must exit 0 and every rank
# print "rank R of N: OK".
# Usage: mpi_ucx.sh N
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../cli/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli/cli_lib.sh"
ranks=${1:?usage: mpi_ucx.sh RANKS}
cli_init "mpi_ucx_$ranks"
sr_need_tool mpicc libopenmpi-dev
sr_need_tool mpirun openmpi-bin
sr_need_tool ucx_info ucx-utils
cli_need_run

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mpicc -O1 -o "$SR_TMP/mpi_exchange" "$here/../mpi/mpi_exchange.c" ||
  sr_fail "mpicc could not build tests/mpi/mpi_exchange.c"

out="$SR_TMP/mpirun.out"
rc=0
# --allow-run-as-root: CI runs as root; --oversubscribe: more ranks than cores.
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- \
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
  --mca pml ucx --mca btl '^openib,uct' \
  -x UCX_NET_DEVICES=softrdma0:1 -x UCX_TLS=rc_verbs,ud_verbs -x UCX_WARN_UNUSED_ENV_VARS=n \
  -x SOFTRDMA_NAMESPACE "$SR_TMP/mpi_exchange" </dev/null >"$out" 2>&1 || rc=$?
sed 's/^/  | /' "$out"
((rc == 0)) || sr_fail "mpirun exited with $rc (124: timed out)"
for ((r = 0; r < ranks; ++r)); do
  grep -qx "rank $r of $ranks: OK" "$out" || sr_fail "rank $r did not report OK"
done
sr_log "PASS: $ranks ranks exchanged messages (blocking, non-blocking 1 MiB, collectives)"
