#!/usr/bin/env bash
# lib.sh leaves nothing behind when a program outlives the PID a test
# started: here `timeout`'s child, which the SIGKILL of `timeout` cannot
# reach, still writing into $SR_DIR. Before, the program kept running (an
# orphan, until it ended by itself), $SR_DIR stayed mounted (busy) and its
# directory stayed in /tmp. A test script that sources lib.sh starts it on
# host a and exits; then no process of its host may run, and its directory
# may be neither mounted nor present. Needs root (skips otherwise).
set -euo pipefail

[[ $(id -u) -eq 0 ]] || {
  echo "SKIP: network namespaces need root"
  exit 77
}
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
work=$(mktemp -d /tmp/softrdma-cleanup-test.XXXXXX)
leaked_dir="" leaked_pids=""
finish() {
  # What the script under test left, removed by the PIDs and path it named.
  local pid
  for pid in $leaked_pids; do kill -9 "$pid" 2>/dev/null || true; done
  if [[ -n $leaked_dir ]] && grep -q " $leaked_dir " /proc/self/mountinfo; then
    umount -l "$leaked_dir" 2>/dev/null || true
  fi
  [[ -z $leaked_dir ]] || rm -rf "$leaked_dir"
  rm -rf "$work"
}
trap finish EXIT

cat >"$work/inner.sh" <<EOF
source "$lib"
sr_host_one
sr_on_bg a timeout 60 sleep 60 >"\$SR_DIR/sleep.out" 2>&1
# Until timeout has started its child: two processes in the host.
for _ in \$(seq 100); do
  [[ \$(ip netns pids "\$(sr_netns a)" | wc -l) -ge 2 ]] && break
  sleep 0.05
done
echo "dir=\$SR_DIR"
echo "pids=\$(ip netns pids "\$(sr_netns a)" | tr '\n' ' ')"
EOF
status=0
bash "$work/inner.sh" >"$work/out" 2>&1 || status=$?
if [[ $status -eq 77 ]]; then
  cat "$work/out"
  exit 77
fi
leaked_dir=$(sed -n 's/^dir=//p' "$work/out")
leaked_pids=$(sed -n 's/^pids=//p' "$work/out")
if [[ -z $leaked_dir || $(wc -w <<<"$leaked_pids") -lt 2 ]]; then
  cat "$work/out" >&2
  echo "FAIL: the script under test did not start its program (exit $status)" >&2
  exit 1
fi

failures=()
if [[ $status -ne 0 ]]; then failures+=("the script exited $status"); fi
# Running: neither gone nor a zombie (killed, its reaping left to init).
running() { [[ $(ps -o stat= -p "$1" 2>/dev/null) =~ ^[^Z] ]]; }
for pid in $leaked_pids; do
  if running "$pid"; then
    failures+=("process $pid of host a still runs: $(ps -o args= -p "$pid" || true)")
  fi
done
if grep -q " $leaked_dir " /proc/self/mountinfo; then failures+=("$leaked_dir is still mounted"); fi
if [[ -e $leaked_dir ]]; then failures+=("$leaked_dir is still there"); fi
if [[ ${#failures[@]} -gt 0 ]]; then
  cat "$work/out" >&2
  printf 'FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "PASS: nothing left (host a's processes $leaked_pids, $leaked_dir)"
