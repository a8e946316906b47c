#!/usr/bin/env bash
# rdma-core's conformance suite (pyverbs, Debian package python3-pyverbs)
# against the libibverbs.so.1 built here: a copy of
# /usr/share/doc/rdma-core/tests with its .gz files gunzipped, run in a fresh
# SOFTRDMA_NAMESPACE under a deadline. docs/conformance.md has the counts and
# every skip with its reason.
#
# Fails if any test fails or errors, except the ones listed in KNOWN_FAILING
# below; fails too if a listed test does anything but fail (the list is kept
# exact: remove a test from it, and from docs/conformance.md, once it passes).
# Skips (77) when python3-pyverbs is not installed.
#
# Environment: SOFTRDMA_TEST_LIB_DIR (see ../interop/lib.sh),
# SR_TIMEOUT (seconds for the whole suite, default 300),
# SOFTRDMA_PYVERBS_SUITE (the suite's directory, default Debian's),
# SOFTRDMA_PYVERBS_LAUNCHER (the `softrdma` command: the suite then runs
# under `softrdma run`, which presents the device's sysfs files, so that the
# rdma_cm tests find the device's IP address and run; they must all pass
# then; skips when `softrdma run` cannot set up its namespaces here).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../interop/lib.sh"

# Test ids known to fail, one per line, each with a comment giving its
# reason and owner. Keep in step with the "Known failures" section of
# docs/conformance.md. Empty now: every test that runs passes.
KNOWN_FAILING=()

SR_TIMEOUT=${SR_TIMEOUT:-300}
sr_init pyverbs_suite "$@"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=${SOFTRDMA_PYVERBS_SUITE:-/usr/share/doc/rdma-core/tests}
# pyverbs is a module of Debian's own python3, which may not be the first
# python3 on PATH.
python=/usr/bin/python3
if ! [[ -x "$python" && -f "$suite/run_tests.py" ]] || ! "$python" -c 'import pyverbs' 2>/dev/null; then
  sr_skip "python3-pyverbs is not installed (no pyverbs module for $python or no" \
    "$suite/run_tests.py); install it with: apt-get install python3-pyverbs" \
    "(or run scripts/install-deps.sh)"
fi

copy="$SR_TMP/tests"
cp -r "$suite" "$copy"
find "$copy" -name '*.gz' -exec gunzip -f {} +

results="$SR_TMP/results.tsv"
log="$SR_TMP/suite.log"
start=$SECONDS
rc=0
launcher=()
if [[ -n "${SOFTRDMA_PYVERBS_LAUNCHER:-}" ]]; then
  launcher=("$SOFTRDMA_PYVERBS_LAUNCHER" run --)
  probe=0
  sr_run "${launcher[@]}" true >"$SR_TMP/probe.log" 2>&1 || probe=$?
  ((probe != 124)) || sr_skip "softrdma run cannot set up its namespaces here:" \
    "$(head -c 300 "$SR_TMP/probe.log")"
  ((probe == 0)) || sr_fail "softrdma run -- true exited with $probe: $(cat "$SR_TMP/probe.log")"
fi
sr_run "${launcher[@]}" "$python" "$here/pyverbs_results.py" "$copy" "$results" \
  --dev "$SR_DEVICE" >"$log" 2>&1 || rc=$?
elapsed=$((SECONDS - start))
if ((rc != 0)) || [[ ! -s "$results" ]]; then
  cat "$log" >&2
  ((rc != 124)) || sr_fail "the suite did not finish within ${SR_TIMEOUT} s"
  sr_fail "the suite's runner exited with $rc"
fi

declare -A outcome=()
declare -A detail=()
while IFS=$'\t' read -r result id why; do
  outcome[$id]=$result
  detail[$id]=$why
done <"$results"

declare -A known=()
for id in "${KNOWN_FAILING[@]}"; do known[$id]=1; done

passed=0 skipped=0 failed=0 unexpected=()
for id in "${!outcome[@]}"; do
  case "${outcome[$id]}" in
    pass | xfail) passed=$((passed + 1)) ;;
    skip) skipped=$((skipped + 1)) ;;
    *)
      failed=$((failed + 1))
      [[ -n "${known[$id]:-}" ]] || unexpected+=("${outcome[$id]}: $id: ${detail[$id]}")
      ;;
  esac
done
# Under `softrdma run` the rdma_cm tests have what they look for: none may
# skip.
if ((${#launcher[@]})); then
  for id in "${!outcome[@]}"; do
    if [[ "$id" == tests.test_rdmacm.* && "${outcome[$id]}" == skip ]]; then
      unexpected+=("skip under softrdma run: $id: ${detail[$id]}")
    fi
  done
fi
stale=()
for id in "${KNOWN_FAILING[@]}"; do
  case "${outcome[$id]:-missing}" in
    fail | error) ;;
    *) stale+=("$id (${outcome[$id]:-not run})") ;;
  esac
done

sr_log "${#outcome[@]} tests in ${elapsed} s: $passed passed, $failed failed or errors" \
  "(${#KNOWN_FAILING[@]} known), $skipped skipped"
sr_log "skips by reason:"
awk -F'\t' '$1 == "skip" { n[$3]++ } END { for (r in n) printf "  %4d  %s\n", n[r], r }' \
  "$results" | sort -rn
if ((${#unexpected[@]} || ${#stale[@]})); then
  cat "$log" >&2
  for line in "${unexpected[@]}"; do printf 'unexpected %s\n' "$line" >&2; done
  for line in "${stale[@]}"; do
    printf 'listed in KNOWN_FAILING but did not fail: %s\n' "$line" >&2
  done
  sr_fail "${#unexpected[@]} unexpected failures, ${#stale[@]} known failures that did not fail" \
    "(keep KNOWN_FAILING in $0 and docs/conformance.md exact)"
fi
sr_log "PASS: no failure outside the ${#KNOWN_FAILING[@]} known ones"
