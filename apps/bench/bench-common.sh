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
