#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -DTETHER_FUZZ=ON) in DIR (default build/fuzz) and
# runs each for TETHER_FUZZ_SECONDS (default 10) from its seed corpus, with a fixed
# seed. Exits non-zero if the build fails or any target finds a crash, a sanitizer
# report or a broken invariant; the failing input is left in DIR/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/fuzz}
seconds=${TETHER_FUZZ_SECONDS:-10}
targets=(tether-fuzz-wire tether-fuzz-channel-hello tether-fuzz-channel-notification
         tether-fuzz-hybrid-address tether-fuzz-remote-buffer tether-fuzz-shm-mailbox tether-fuzz-tcp-frames)

command -v clang++ >/dev/null || { echo "tether fuzz: clang++ not found; install clang and libclang-rt-14-dev"; exit 1; }
mkdir -p "$(dirname "$dir")"
# shellcheck source=tests/compile-options.sh
source tests/compile-options.sh  # line_tables, unity
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${line_tables[@]}" "${unity[@]}" -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTETHER_FUZZ=ON -DTETHER_WERROR=ON -DTETHER_BUILD_BENCH=OFF \
  >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j "${TETHER_BUILD_JOBS:-$(nproc)}" --target "${targets[@]}"

# One target, its report kept in $dir/$target.outcome (printed whole when it is reaped, so
# reports of targets running side by side do not interleave); exits non-zero on a failure.
fuzz_target() {
  local target=$1 work="$dir/corpus/$1" start=$SECONDS  # new inputs go to work; the seeds stay as they are
  mkdir -p "$work"
  if "$dir/tests/fuzz/$target" -max_total_time="$seconds" -seed=1 -print_final_stats=1 \
      -artifact_prefix="$dir/artifacts/$target-" "$work" "tests/fuzz/corpus/$target" >"$dir/$target.log" 2>&1; then
    echo "tether fuzz: $target: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$dir/$target.log" |
      grep -o '[0-9]*$') runs in $((SECONDS - start)) s, no failure" >"$dir/$target.outcome"
  else
    { echo "tether fuzz: $target FAILED; the last lines of $dir/$target.log:"; tail -n 40 "$dir/$target.log"; } \
      >"$dir/$target.outcome"
    return 1
  fi
}

# As many targets at once as TETHER_BUILD_JOBS or the CPUs (each is single-threaded).
((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501)) || { echo "tether fuzz: needs bash 5.1 or later (wait -p)"; exit 1; }
parallel=${TETHER_BUILD_JOBS:-$(nproc)}
mkdir -p "$dir/artifacts"
declare -A running=()  # pid -> target
failed=()
# On the way out (Ctrl-C, a failed step) no fuzzer is left running; the exit status stays.
stop_running() {
  local status=$?
  ((${#running[@]} == 0)) || kill "${!running[@]}" 2>/dev/null || true
  exit "$status"
}
trap stop_running EXIT
reap_one() {
  local pid=""
  wait -n -p pid "${!running[@]}" || failed+=("${running[$pid]}")
  cat "$dir/${running[$pid]}.outcome" 2>/dev/null || echo "tether fuzz: ${running[$pid]} left no report"
  unset "running[$pid]"
}
for target in "${targets[@]}"; do
  ((${#running[@]} < parallel)) || reap_one
  fuzz_target "$target" &
  running[$!]=$target
done
while ((${#running[@]})); do reap_one; done
((${#failed[@]} == 0)) || { echo "tether fuzz: ${#failed[@]} target(s) failed: ${failed[*]}"; exit 1; }
