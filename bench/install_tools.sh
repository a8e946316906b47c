#!/usr/bin/env bash
# Installs the Debian packages a bench script needs and are missing, shared by
# bench/run.sh and bench/roce_netns.sh so that each states only its list.
# apt-get output goes to LOG; one line per action goes to stderr. Returns 0
# even when it cannot install (not root and no sudo, apt-get failing): the
# caller then reports the measurements needing the missing tools as errors
# or skips, as it does on a machine without them.
#   bench/install_tools.sh LOG PACKAGE...
set -uo pipefail
log_file=${1:?usage: install_tools.sh LOG PACKAGE...}
shift
missing=()
for pkg in "$@"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
((${#missing[@]})) || exit 0
echo "bench: installing missing Debian packages: ${missing[*]}" >&2
as_root=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "bench: not root and no sudo: install ${missing[*]} yourself" >&2
    exit 0
  fi
  as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
apt_install() {
  "${as_root[@]}" apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >>"$log_file" 2>&1
}
# Try without `apt-get update` first: the package lists are usually fresh
# enough, and an update takes a while.
apt_install || { "${as_root[@]}" apt-get update >>"$log_file" 2>&1 && apt_install; } ||
  echo "bench: apt-get failed (see $log_file); the measurements needing ${missing[*]} will be errors" >&2
exit 0
