#!/usr/bin/env bash
# Install the Debian packages softrdma needs to build, test and run its demo.
# Idempotent: packages already installed are left alone, and `apt-get update`
# runs only when something is missing. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # toolchain
  libibverbs-dev librdmacm-dev       # rdma-core 44 headers: our ABI contract
  zlib1g-dev libisal-dev             # the RoCEv2 ICRC: ISA-L's CRC-32, zlib's CRC combination
  libgtest-dev googletest            # unit tests
  ibverbs-utils perftest rdmacm-utils  # unmodified programs the tests run
  python3-pyverbs                    # rdma-core's conformance suite (tests/conformance)
  ucx-utils libucx-dev openmpi-bin libopenmpi-dev libfabric-bin  # RDMA middleware run under `softrdma run`
  tshark iproute2 nftables            # tests across network namespaces: captures, hosts, loss
)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: this script needs a Debian-like system (dpkg-query and apt-get)." >&2
  echo "install-deps: install these packages by other means: ${packages[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed."
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: not root and sudo is not available; as root, run:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update
"${as_root[@]}" apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}"
echo "install-deps: installed: ${missing[*]}"
