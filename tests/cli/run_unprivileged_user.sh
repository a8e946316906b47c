#!/usr/bin/env bash
# softrdma run as an unprivileged user (a user namespace mapping the uid to
# itself): when the tests run as root, the checks run as nobody through
# setpriv; as any other user, every cli.run test already runs unprivileged.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_unprivileged_user
[[ "$(id -u)" -eq 0 ]] || sr_skip "not root: the other cli.run tests already run softrdma run unprivileged"
command -v setpriv >/dev/null || sr_skip "setpriv (util-linux) is missing"
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${as_nobody[@]}" test -x "$SOFTRDMA_BIN" ||
  sr_skip "nobody cannot reach $SOFTRDMA_BIN (a parent directory is not searchable)"

out="$SR_TMP/out"
rc=0
timeout -k 5 "$SR_TIMEOUT" "${as_nobody[@]}" "$SOFTRDMA_BIN" run sh -c '
  echo "ids=$(id -u):$(id -g)"
  echo "state=$(cat /sys/class/infiniband/softrdma0/ports/1/state)"
  test -c /dev/infiniband/usoftrdma0 && test -r /dev/infiniband/usoftrdma0 &&
    test -w /dev/infiniband/usoftrdma0 && echo "node=ok"
  ibv_devices
  exit 9
' </dev/null >"$out" 2>&1 || rc=$?
sed 's/^/  | /' "$out"
if ((rc == 124)); then
  sr_skip "unprivileged user namespaces are refused here: $(head -1 "$out")"
fi
((rc == 9)) || sr_fail "softrdma run as nobody exited with $rc, expected the command's 9"
grep -qx 'ids=65534:65534' "$out" || sr_fail "the command does not run as nobody's uid/gid"
grep -qx 'state=4: ACTIVE' "$out" || sr_fail "port state not readable in sysfs"
grep -qx 'node=ok' "$out" || sr_fail "/dev/infiniband/usoftrdma0 not a R/W character device"
grep -Eq '^[[:space:]]+softrdma0[[:space:]]' "$out" || sr_fail "ibv_devices does not list softrdma0"
sr_log "PASS: as nobody: uid kept, sysfs and /dev/infiniband present, softrdma0 listed, status passed"
