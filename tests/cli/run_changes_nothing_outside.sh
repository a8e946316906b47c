#!/usr/bin/env bash
# While a command runs under softrdma run, and after it ends, nothing changes
# for the processes outside: the same mounts, no /sys/class/infiniband or
# /dev/infiniband appearing, nothing left in /tmp; the command keeps the uid
# and gid of its caller; and /dev/shm is shared both ways (so softrdma's
# registry is the same inside and outside).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_changes_nothing_outside
cli_need_run

# /tmp is where `run` assembles its mounts (inside its namespace): outside,
# the same /tmp (device, inode, file system) and none of the stage's entries.
# Its listing is not compared: other tests write there concurrently.
snapshot() {
  cat /proc/self/mountinfo
  echo "--- /sys/class"
  ls -A /sys/class
  ls -A /sys/class/infiniband /sys/class/infiniband_verbs 2>&1 || true
  echo "--- /dev"
  ls -A /dev
  ls -A /dev/infiniband 2>&1 || true
  echo "--- /tmp"
  stat -c '%d %i' /tmp
  stat -f -c '%T' /tmp
  ls -d /tmp/sysclass /tmp/dev 2>&1 || true
}

snapshot >"$SR_TMP/before"
inside_file="/dev/shm/softrdma-$SR_NS-made-inside"
outside_file="/dev/shm/softrdma-$SR_NS-made-outside"

timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run sh -c '
  dir=$1 inside=$2 outside=$3
  { id -u; id -g; } >"$dir/ids.inside"
  : >"$inside"
  : >"$dir/started"
  while [ ! -e "$dir/stop" ]; do sleep 0.05; done
  test -e "$outside" || exit 95
' sh "$SR_TMP" "$inside_file" "$outside_file" >"$SR_TMP/run.out" 2>&1 &
pid=$!
SR_PIDS+=("$pid")
for _ in $(seq 200); do
  [[ -e "$SR_TMP/started" ]] && break
  sleep 0.05
done
[[ -e "$SR_TMP/started" ]] || sr_fail "the command under softrdma run did not start: $(cat "$SR_TMP/run.out")"

snapshot >"$SR_TMP/during"
diff -u "$SR_TMP/before" "$SR_TMP/during" || sr_fail "the system changed outside while the command ran"
[[ -e "$inside_file" ]] || sr_fail "a /dev/shm file made inside is not visible outside"
: >"$outside_file"
: >"$SR_TMP/stop"
sr_wait "$pid"
((SR_RC == 0)) || sr_fail "the command exited with $SR_RC (95: a /dev/shm file made outside was not visible inside)"

snapshot >"$SR_TMP/after"
diff -u "$SR_TMP/before" "$SR_TMP/after" || sr_fail "the system changed outside after the command ended"
[[ "$(cat "$SR_TMP/ids.inside")" == "$(id -u; id -g)" ]] ||
  sr_fail "uid/gid inside ($(tr '\n' ' ' <"$SR_TMP/ids.inside")) differ from outside ($(id -u) $(id -g))"
sr_log "PASS: mounts, /sys/class, /dev and /tmp unchanged during and after; uid $(id -u) gid $(id -g) kept; /dev/shm shared both ways"
