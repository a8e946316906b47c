# Shell helpers shared by the interop tests (tests/interop/lib.sh) and the
# benchmark (bench/run.sh): process liveness and free TCP ports, read from
# /proc so that no procps/iproute2 is needed. Source it; it defines functions
# only.

# proc_alive PID: the process exists and is not a zombie.
proc_alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ "${stat%% *}" != Z ]]
}

# port_in_use PORT [LISTEN]: PORT appears in /proc/net/tcp{,6} (only
# listening sockets when the second argument is given).
port_in_use() {
  local hex f _sl local_addr _rem st _rest
  hex=$(printf '%04X' "$1")
  for f in /proc/net/tcp /proc/net/tcp6; do
    [[ -r "$f" ]] || continue
    while read -r _sl local_addr _rem st _rest; do
      [[ "${local_addr##*:}" == "$hex" ]] || continue
      [[ -z "${2:-}" || "$st" == 0A ]] && return 0
    done <"$f"
  done
  return 1
}

# free_port: print a TCP port nobody uses now (below the usual ephemeral
# range); fails after 200 tries.
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((10000 + RANDOM % 22000))
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  return 1
}
