#!/usr/bin/env bash
# Runs tether-bench-transport and fi_pingpong (the baseline, Debian libfabric-bin) in the
# same run on ofi:shm and ofi:tcp (tcp;ofi_rxm on lo), and prints OSU-style tables with
# the ratio to fi_pingpong. Each figure is the best of ROUNDS alternating runs, so a busy
# machine penalises both sides alike.
#   transport/bench/run-bench.sh [BUILD_DIR] [ROUNDS] [ITERATIONS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
iterations=${3:-20000}
bench="$build/transport/tether-bench-transport"
[ -x "$bench" ] || { echo "no $bench: build first (ninja -C $build)"; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: apt-get install libfabric-bin"; exit 1; }
port=47800
# shellcheck source=transport/bench/bench-cpus.sh
source "$(dirname "$0")/bench-cpus.sh"

# fi_pingpong_us PROVIDER DOMAIN SIZE ITERATIONS -> one-way microseconds (usec/xfer; the
# size column reads 1k, 64k, 1m, so the row after the header is taken)
fi_pingpong_us() {
  local provider=$1 domain=$2 size=$3 count=$4 server out
  port=$((port + 1))
  on_bench_cpu 0 timeout 120 fi_pingpong -p "$provider" -d "$domain" -e rdm -S "$size" -I "$count" -B "$port" \
    >/dev/null 2>&1 &
  server=$!
  sleep 0.3
  out=$(on_bench_cpu 1 timeout 120 fi_pingpong -p "$provider" -d "$domain" -e rdm -S "$size" -I "$count" -P "$port" \
    127.0.0.1 2>&1)
  wait "$server" || true
  awk '$1 == "bytes" { header = 1; next } header && NF >= 7 { value = $7 } END { print value }' <<<"$out"
}

# tether_us TRANSPORT SIZE ITERATIONS -> one-way microseconds
tether_us() {
  "$bench" --transport "$1" --sizes "$2" --bw-sizes "" --iterations "$3" --csv | awk -F, '/^latency_us/ { print $3 }'
}

min() { sort -g | head -1; }
max() { sort -g | tail -1; }
iterations_for() { if (($1 >= 1048576)); then echo $((iterations / 100 > 20 ? iterations / 100 : 20)); elif (($1 >= 65536)); then echo $((iterations / 10)); else echo "$iterations"; fi; }

for transport in ofi:shm ofi:tcp; do
  case $transport in
    ofi:shm) provider=shm; domain=shm ;;
    ofi:tcp) provider="tcp;ofi_rxm"; domain=lo ;;
  esac
  echo "# transport $transport (fi_pingpong -p '$provider' -d $domain -e rdm), best of $rounds rounds"
  echo "# Size      Latency (us)  fi_pingpong (us)  ratio"
  for size in 8 1024 65536 1048576; do
    count=$(iterations_for "$size")
    ours=() theirs=()
    for ((r = 0; r < rounds; r++)); do
      theirs+=("$(fi_pingpong_us "$provider" "$domain" "$size" "$count")")
      ours+=("$(tether_us "$transport" "$size" "$count")")
    done
    best_ours=$(printf '%s\n' "${ours[@]}" | min)
    best_theirs=$(printf '%s\n' "${theirs[@]}" | min)
    printf '%-11s %-13.2f %-17.2f %.2f\n' "$size" "$best_ours" "$best_theirs" \
      "$(awk -v a="$best_ours" -v b="$best_theirs" 'BEGIN { print (b > 0 ? a / b : 0) }')"
  done
  echo "# Size      Bandwidth (MB/s)  RMA write, window 64 (best of $rounds)"
  for size in 65536 1048576 4194304; do
    results=()
    for ((r = 0; r < rounds; r++)); do
      results+=("$("$bench" --transport "$transport" --sizes "" --bw-sizes "$size" --iterations "$iterations" --csv | awk -F, '/^bandwidth/ { print $3 }')")
    done
    printf '%-11s %.1f\n' "$size" "$(printf '%s\n' "${results[@]}" | max)"
  done
done
