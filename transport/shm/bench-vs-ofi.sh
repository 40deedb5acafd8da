#!/usr/bin/env bash
# tether's own shared-memory transport against libfabric's shm provider, same run:
# tether-bench-transport on shm-own and ofi:shm alternately, best of ROUNDS each, and
# fi_pingpong (shm) at 8 B for reference. Prints OSU-style rows with ratios.
#   transport/shm/bench-vs-ofi.sh [BUILD_DIR] [ROUNDS] [ITERATIONS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
iterations=${3:-20000}
bench="$build/transport/tether-bench-transport"
[ -x "$bench" ] || { echo "no $bench: build first (cmake --build $build)"; exit 1; }

# figure TRANSPORT KIND SIZE -> latency (us) or bandwidth (MB/s)
figure() {
  if [ "$2" = latency ]; then
    "$bench" --transport "$1" --sizes "$3" --bw-sizes "" --iterations "$iterations" --csv | awk -F, '/^latency_us/ { print $3 }'
  else
    "$bench" --transport "$1" --sizes "" --bw-sizes "$3" --iterations "$iterations" --csv | awk -F, '/^bandwidth/ { print $3 }'
  fi
}

best() {  # best KIND VALUES... (latency: lowest; bandwidth: highest)
  local kind=$1; shift
  if [ "$kind" = latency ]; then printf '%s\n' "$@" | sort -g | head -1; else printf '%s\n' "$@" | sort -g | tail -1; fi
}

# shellcheck source=transport/bench/bench-cpus.sh
source "$(dirname "$0")/../bench/bench-cpus.sh"
fi_pingpong_8b() {
  command -v fi_pingpong >/dev/null || { echo "n/a"; return; }
  on_bench_cpu 0 timeout 60 fi_pingpong -p shm -e rdm -S 8 -I "$iterations" -B 47950 >/dev/null 2>&1 &
  sleep 0.3
  on_bench_cpu 1 timeout 60 fi_pingpong -p shm -e rdm -S 8 -I "$iterations" -P 47950 127.0.0.1 2>&1 |
    awk '$1 == "bytes" { header = 1; next } header && NF >= 7 { value = $7 } END { print value }'
  wait || true
}

echo "# shm-own vs ofi:shm (libfabric $(pkg-config --modversion libfabric 2>/dev/null || echo '?')), best of $rounds rounds, $(date -u '+%F %H:%M') UTC"
echo "# Kind       Size      shm-own     ofi:shm     ratio (latency: own/ofi; bandwidth: own/ofi)"
for row in latency:8 latency:1024 latency:8192 bandwidth:65536 bandwidth:1048576 bandwidth:4194304; do
  kind=${row%%:*} size=${row##*:}
  own=() ofi=()
  for ((r = 0; r < rounds; r++)); do
    own+=("$(figure shm-own "$kind" "$size")")
    ofi+=("$(figure ofi:shm "$kind" "$size")")
  done
  a=$(best "$kind" "${own[@]}") b=$(best "$kind" "${ofi[@]}")
  printf '%-10s %-9s %-11.2f %-11.2f %.2f\n' "$kind" "$size" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print (b > 0 ? a / b : 0) }')"
done
echo "# fi_pingpong -p shm, 8 B one-way (us): $(fi_pingpong_8b)"
