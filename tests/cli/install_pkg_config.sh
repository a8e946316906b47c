#!/usr/bin/env bash
# cmake --install into a temporary prefix P gives the libraries with their
# development links, the headers, pkg-config files and bin/softrdma; a C
# program built with `pkg-config --cflags --libs libibverbs librdmacm`
# (PKG_CONFIG_PATH=P/lib/pkgconfig) compiles against P's headers, links P's
# libraries and, run with P's libraries (LD_LIBRARY_PATH, or P/bin/softrdma
# run), sees softrdma0. The prefix is removed on exit.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init install_pkg_config
: "${SOFTRDMA_TEST_BUILD_DIR:?the build directory (ctest passes it)}"
cmake_bin=${SOFTRDMA_TEST_CMAKE:-cmake}
sr_need_tool pkg-config pkg-config
sr_need_tool cc gcc

prefix="$SR_TMP/prefix"
"$cmake_bin" --install "$SOFTRDMA_TEST_BUILD_DIR" --prefix "$prefix" >"$SR_TMP/install.log" 2>&1 ||
  { cat "$SR_TMP/install.log"; sr_fail "cmake --install failed"; }

pc_dir=$(dirname "$(find "$prefix" -name libibverbs.pc -print -quit)")
export PKG_CONFIG_PATH=$pc_dir
[[ "$PKG_CONFIG_PATH" == "$prefix"/* ]] || sr_fail "no libibverbs.pc installed"
libdir=$(pkg-config --variable=libdir libibverbs)
includedir=$(pkg-config --variable=includedir libibverbs)
[[ "$libdir" == "$prefix"/* && "$includedir" == "$prefix"/* ]] ||
  sr_fail "libibverbs.pc points outside the prefix: libdir=$libdir includedir=$includedir"
for f in "$libdir/libibverbs.so" "$libdir/libibverbs.so.1" "$libdir/librdmacm.so" \
  "$libdir/librdmacm.so.1" "$libdir/pkgconfig/librdmacm.pc" "$prefix/bin/softrdma" \
  "$includedir/infiniband/verbs.h" "$includedir/infiniband/verbs_api.h" \
  "$includedir/rdma/rdma_cma.h" "$includedir/infiniband/sa.h"; do
  [[ -e "$f" ]] || sr_fail "$f is not installed"
done
[[ "$(readlink -f "$libdir/libibverbs.so")" == "$(readlink -f "$libdir/libibverbs.so.1")" ]] ||
  sr_fail "libibverbs.so does not lead to libibverbs.so.1"

flags=$(pkg-config --cflags --libs libibverbs librdmacm)
sr_log "pkg-config --cflags --libs libibverbs librdmacm: $flags"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2086 # the flags are words
cc -o "$SR_TMP/client" -MD -MF "$SR_TMP/client.d" "$here/pkg_config_client.c" $flags
grep -q "$includedir/infiniband/verbs.h" "$SR_TMP/client.d" ||
  sr_fail "the client was not compiled against $includedir/infiniband/verbs.h"

out="$SR_TMP/client.out"
rc=0
LD_LIBRARY_PATH="$libdir" timeout -k 5 "$SR_TIMEOUT" "$SR_TMP/client" >"$out" 2>&1 || rc=$?
sed 's/^/  | /' "$out"
((rc == 0)) || sr_fail "the client exited with $rc"
grep -qx 'device softrdma0 port 1 active' "$out" || sr_fail "the client does not see softrdma0"
grep -q "^loaded $libdir/libibverbs.so" "$out" || sr_fail "the client did not load $libdir's libibverbs"

# The installed command finds the installed libraries on its own.
SOFTRDMA_BIN="$prefix/bin/softrdma"
cli_run "$out" --version
((CLI_RC == 0)) || sr_fail "the installed softrdma --version exited with $CLI_RC"
cli_run "$out" run "$SR_TMP/client"
if ((CLI_RC == 124)); then
  sr_log "softrdma run refused here (user namespaces): checked with LD_LIBRARY_PATH only"
else
  ((CLI_RC == 0)) || sr_fail "P/bin/softrdma run client exited with $CLI_RC"
  grep -qx 'device softrdma0 port 1 active' "$out" || sr_fail "under P/bin/softrdma run the client does not see softrdma0"
  grep -q "^loaded $libdir/libibverbs.so" "$out" || sr_fail "P/bin/softrdma run gave another libibverbs"
fi
sr_log "PASS: installed into a temporary prefix; a pkg-config client built and ran on softrdma0"
