# shellcheck shell=bash
# Sourced by the bench scripts of apps/bench.
# bench_locate BUILD_DIR SCRIPT PROGRAM...: sets runner (tether-run, installed or in the build
# tree) and apps (BUILD_DIR/apps/bench), and exits naming the first of the PROGRAMs (found
# under apps) that is not built.
bench_locate() {
  local build=$1 script=$2 program
  shift 2
  runner="$build/tether-run"
  [ -x "$runner" ] || runner="$build/launch/tether-run"
  apps="$build/apps/bench"
  for program in "$runner" "${@/#/$apps/}"; do
    [ -x "$program" ] || { echo "$script: no $program: build first (cmake --build $build)"; exit 1; }
  done
}

# bench_tcp_congestion_note: one comment line naming each side's TCP congestion control
# (tcp-own picks its own on connections to this host; Open MPI keeps the system's).
bench_tcp_congestion_note() {
  local system
  system=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
  echo "# tcp congestion control: tether TETHER_TCP_CONGESTION=${TETHER_TCP_CONGESTION:-auto}" \
    "(auto: reno on connections to this host), Open MPI the system's ($system)"
}
