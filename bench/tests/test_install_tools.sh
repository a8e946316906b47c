#!/usr/bin/env bash
# bench/install_tools.sh against stand-ins for dpkg-query, apt-get and id on
# PATH (nothing is installed): it must ask apt-get for exactly the missing
# packages, try `apt-get update` only after a failed install, say so when
# apt-get fails, never fail itself, and ask for nothing when all are there.
set -euo pipefail
script=$(cd "$(dirname "$0")/.." && pwd)/install_tools.sh
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
mkdir "$work/bin"
# dpkg-query: a package is installed when its name is listed in $work/installed.
cat >"$work/bin/dpkg-query" <<'STUB'
#!/usr/bin/env bash
pkg=${!#}
if grep -qx -- "$pkg" "$STUB_DIR/installed"; then printf 'install ok installed'; else exit 1; fi
STUB
# apt-get: records its arguments; `install` fails while $work/install_fails exists.
cat >"$work/bin/apt-get" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$STUB_DIR/apt_calls"
[[ $1 == install && -e $STUB_DIR/install_fails ]] && exit 100
exit 0
STUB
printf '#!/bin/sh\necho 0\n' >"$work/bin/id"  # as root: no sudo in the way
chmod +x "$work/bin/"*
export STUB_DIR=$work PATH="$work/bin:$PATH"
fail() { echo "FAIL: $*" >&2; exit 1; }

printf 'alpha\ngamma\n' >"$work/installed"
bash "$script" "$work/log" alpha beta gamma delta 2>"$work/err" || fail "exit status $?"
calls=$(cat "$work/apt_calls")
[[ "$calls" == *"install -y --no-install-recommends"*"beta delta" ]] || fail "apt-get calls: $calls"
grep -q "update" "$work/apt_calls" && fail "apt-get update ran although the install worked"
grep -q "installing missing Debian packages: beta delta" "$work/err" || fail "no notice: $(cat "$work/err")"

rm "$work/apt_calls"; touch "$work/install_fails"
bash "$script" "$work/log" beta 2>"$work/err" || fail "exit status $? when apt-get fails"
[[ $(grep -c '^install' "$work/apt_calls") == 2 && $(grep -c '^update' "$work/apt_calls") == 1 ]] ||
  fail "expected install, update, install: $(cat "$work/apt_calls")"
grep -q "apt-get failed" "$work/err" || fail "failure not reported: $(cat "$work/err")"

rm "$work/apt_calls"
bash "$script" "$work/log" alpha gamma 2>"$work/err" || fail "exit status $?"
[[ ! -e "$work/apt_calls" && ! -s "$work/err" ]] || fail "acted although nothing was missing"
echo "install_tools: 3 cases pass"
