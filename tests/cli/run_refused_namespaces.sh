#!/usr/bin/env bash
# Where the kernel refuses the namespaces, softrdma run exits 124 before
# running anything and names the setting to change. Made real with a user
# namespace whose user.max_user_namespaces is 0, entered by root, and
# softrdma started there as root without CAP_SYS_ADMIN (a container's root).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_refused_namespaces
[[ "$(id -u)" -eq 0 ]] || sr_skip "not root: cannot build a system that refuses namespaces"
if ! command -v unshare >/dev/null || ! command -v setpriv >/dev/null; then
  sr_skip "unshare/setpriv (util-linux) missing"
fi
unshare -Ur true 2>/dev/null || sr_skip "user namespaces are refused here already"

out="$SR_TMP/out"
rc=0
timeout -k 5 "$SR_TIMEOUT" unshare -Ur sh -c '
  echo 0 >/proc/sys/user/max_user_namespaces || exit 90
  exec setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin "$1" run sh -c "echo ran; exit 0"
' sh "$SOFTRDMA_BIN" </dev/null >"$out" 2>&1 || rc=$?
sed 's/^/  | /' "$out"
((rc != 90)) || sr_skip "cannot lower user.max_user_namespaces in a user namespace here"
((rc == 124)) || sr_fail "softrdma run exited with $rc, expected 124"
grep -q '^ran$' "$out" && sr_fail "the command ran although the namespaces were refused"
grep -q 'sysctl -w user.max_user_namespaces=' "$out" || sr_fail "the message does not name user.max_user_namespaces"
grep -q 'CAP_SYS_ADMIN' "$out" || sr_fail "the message does not say root lacks CAP_SYS_ADMIN"
sr_log "PASS: refused namespaces give exit 124 and the sysctl to change"
