#!/usr/bin/env bash
# pool/rcache/bench/hit-vs-ucx.sh [BUILD_DIR] [PROCESSES]
# The hit workloads of tether-bench-rcache, tether against UCX's ucs_rcache, in PROCESSES
# separate processes. Within a process every workload runs 9 times in random interleaved
# order and the median counts, so a slow stretch of the machine hits both caches alike.
# Prints one line per process: ns per acquire+release at 1, 1,000 and 100,000 regions for
# each cache with the ratio UCX / tether (> 1: tether faster), and the two-thread speed-up;
# beside it the same speed-up with nothing shared (each thread its own cache and regions):
# what the machine gave the same code in that process (a host that puts both vCPUs on one
# core for a while lowers both).
set -euo pipefail
build=${1:-build}
processes=${2:-5}
bench="$build/pool/rcache/tether-bench-rcache"
[ -x "$bench" ] || { echo "hit-vs-ucx.sh: no $bench: build first (ninja -C $build tether-bench-rcache)"; exit 1; }
[[ $("$bench" --benchmark_list_tests) == *hit_ucx* ]] || { echo "hit-vs-ucx.sh: built without UCX (apt-get install libucx-dev, then rebuild)"; exit 1; }
median() { jq -r --arg name "$2" '.benchmarks[] | select(.run_name == $name and .aggregate_name == "median") | .'"$3" "$1"; }
printf '%-8s %-24s %-24s %-24s %-18s %s\n' process "1 region (tether/ucx)" "1,000 regions" "100,000 regions" "two threads / one" "unshared reference"
for process in $(seq "$processes"); do
  json=$(mktemp)
  "$bench" --benchmark_filter='^hit_(tether|ucx|two_threads_tether|two_threads_unshared_tether)' --benchmark_min_time=0.1 --benchmark_repetitions=9 \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true --benchmark_format=json >"$json" 2>/dev/null
  line=$(printf '%-8s' "$process")
  for regions in 1 1000 100000; do
    ours=$(median "$json" "hit_tether/$regions" cpu_time)
    theirs=$(median "$json" "hit_ucx/$regions" cpu_time)
    line+=$(printf ' %-24s' "$(printf '%.1f/%.1f ns %.2fx' "$ours" "$theirs" "$(echo "$theirs / $ours" | bc -l)")")
  done
  one=$(median "$json" "hit_two_threads_tether/1000/real_time/threads:1" items_per_second)
  two=$(median "$json" "hit_two_threads_tether/1000/real_time/threads:2" items_per_second)
  line+=$(printf ' %-18s' "$(printf '%.2fx' "$(echo "$two / $one" | bc -l)")")
  one=$(median "$json" "hit_two_threads_unshared_tether/1000/real_time/threads:1" items_per_second)
  two=$(median "$json" "hit_two_threads_unshared_tether/1000/real_time/threads:2" items_per_second)
  line+=$(printf ' %.2fx' "$(echo "$two / $one" | bc -l)")
  echo "$line"
  rm -f "$json"
done
