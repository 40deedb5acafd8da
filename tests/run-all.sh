#!/usr/bin/env bash
# Builds and runs every test: release build with -Werror, the installed-package consumer,
# then the ASan+UBSan and TSan configurations and the fuzz targets (clang). Set
# TETHER_TEST_QUICK=1 to skip sanitizers and fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
failures=0

build() {  # build DIR [cmake options...] [--target TARGETS...]
  local dir=$1; shift
  local options=() targets=()
  while (($#)) && [ "$1" != --target ]; do options+=("$1"); shift; done
  (($#)) && { shift; targets=(--target "$@"); }
  cmake -S . -B "$dir" -G Ninja -DTETHER_WERROR=ON "${options[@]}" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
}

run_ctest() {  # run_ctest DIR [ctest options...]
  local dir=$1; shift
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" --timeout 600 "$@" || failures=$((failures + 1))
}

# shellcheck source=tests/compile-options.sh
source tests/compile-options.sh  # line_tables, unity

mkdir -p build
echo "== release build and tests (at ${SECONDS} s)"
build build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo "${line_tables[@]}" "${unity[@]}"
run_ctest build/release

echo "== installed package: find_package(tether) and pkg-config consumers (at ${SECONDS} s)"
rm -rf build/stage build/consumer
cmake --install build/release --prefix "$PWD/build/stage" >/dev/null
bash tests/consumer/check.sh "$PWD/build/stage" build/consumer || failures=$((failures + 1))

if [ "${TETHER_TEST_QUICK:-0}" != 1 ]; then
  echo "== ASan+UBSan build and tests (at ${SECONDS} s)"
  build build/asan -DCMAKE_BUILD_TYPE=Debug "${line_tables[@]}" "${unity[@]}" -DTETHER_SANITIZE=address -DTETHER_BUILD_BENCH=OFF
  # Release only: the halo apps' mpirun runs (label mpi) exercise Open MPI more than tether,
  # their rank-count and radius runs (label matrix) add combinations, not code, and the
  # network-namespace and Slurm deployments (labels netns, slurm; run one at a time) drive
  # the tcp-own and launcher code this stage already runs on lo. The job scenarios over
  # libfabric (names ..._ofishm, ..._ofitcp, and libfabric tcp's ..._tcpsend, _tcprma,
  # _tcpmixed) repeat the engine's and channels' code that the shm-own and tcp-own jobs run
  # here; the ofi backend's own tests (TransportTest, KeyScope) stay. So do the job scenarios
  # over the hybrid transport (shm-own and tcp-own together: MessagingHybridTest and the
  # halo apps' hybrid runs stay), and the pool-buffer sizes over tcp-own (the same engine
  # paths as over shm-own; the user-buffer sizes run on both). The soak runs, the benchmark
  # smoke runs, the halo apps' fault-injection and killed-rank runs and their sendrecv mode
  # (the engine's send/receive, which the messaging jobs run) repeat code run here already.
  ASAN_OPTIONS=detect_leaks=0 run_ctest build/asan -LE "mpi|matrix|netns|slurm" \
    -E "ScenarioPasses/(.*_(ofi|tcpsend|tcprma|tcpmixed|hybrid)|sizes_pool_.*_tcp_)|^Soak\.|^BenchSmoke\.|\
^Halo[23]d\.(FaultCaught|RankKilled)\.|^Halo[23]d\.Verified\.sendrecv\."
  echo "== TSan build and the threaded tests (names with Thread or Concurrent) (at ${SECONDS} s)"
  build build/tsan -DCMAKE_BUILD_TYPE=Debug "${line_tables[@]}" "${unity[@]}" -DTETHER_SANITIZE=thread -DTETHER_BUILD_BENCH=OFF \
    --target tether-thread-tests
  TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" run_ctest build/tsan -R "Thread|Concurrent"
  # 5 s per target here (two at a time), 10 s by default in tests/fuzz/run.sh.
  export TETHER_FUZZ_SECONDS=${TETHER_FUZZ_SECONDS:-5}
  echo "== libFuzzer targets of the wire decoders, $TETHER_FUZZ_SECONDS s each (tests/fuzz) (at ${SECONDS} s)"
  bash tests/fuzz/run.sh build/fuzz || failures=$((failures + 1))
fi

echo "== done (at ${SECONDS} s)"
if ((failures)); then
  echo "tether: $failures test stage(s) failed"
  exit 1
fi
echo "tether: every test stage passed"
