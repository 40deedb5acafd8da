#!/usr/bin/env bash
# apps/bench/pingpong-vs-mpi.sh [BUILD_DIR] [ROUNDS]
# tether against Open MPI on 2 ranks of this node, in one run: tether-pingpong/tether-bw
# under tether-run on-node (shm-own) and over tcp (TETHER_SHM=off: tcp-own on lo), the
# transport-level ping-pong (tether-bench-transport, skipped when it prints no figure), and
# tether-mpi-pingpong/tether-mpi-bw under mpirun on-node (default) and over TCP (btl
# self,tcp, pml ob1). Each figure is the best of ROUNDS alternating runs, so load from
# other processes penalises both sides alike. Prints every table, then one table of ratios.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
sizes=1,8,64,1024,8192,65536,1048576,4194304
# latency iterations at small sizes per path (the apps scale them down for large sizes):
# tens of milliseconds per size, so one timer interrupt or preemption moves a figure little
declare -A latency_iterations=([shm]=50000 [tcp]=5000)
# shellcheck source=apps/bench/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
# shellcheck source=transport/bench/bench-cpus.sh
source "$(dirname "$0")/../../transport/bench/bench-cpus.sh"
bench_locate "$build" pingpong-vs-mpi.sh tether-pingpong tether-bw
have_mpi=1
if [ ! -x "$apps/tether-mpi-pingpong" ] || ! command -v mpirun >/dev/null; then
  have_mpi=0
  echo "# no Open MPI baselines (apt-get install libopenmpi-dev openmpi-bin, then rebuild)"
fi
results=$(mktemp -d /tmp/tether-bench.XXXXXX)
trap 'rm -rf "$results"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_tcp=(--mca btl "self,tcp" --mca pml ob1 --mca btl_tcp_if_include lo)
mpi_common=(-n 2 --mca oob_tcp_if_include lo --mca btl_base_warn_component_unused 0)

# iterations_option PATH APP: --iterations for latency runs, the default for bandwidth
iterations_option() { if [ "$2" = pingpong ]; then echo "--iterations ${latency_iterations[$1]}"; fi; }

# tether_app PATH APP ROUND: tether-APP on 2 ranks; PATH shm or tcp
tether_app() {
  local environment=(TETHER_SHM=on)
  [ "$1" = tcp ] && environment=(TETHER_SHM=off TETHER_TCP_INTERFACE=lo TETHER_OFI_DOMAIN=lo)
  # shellcheck disable=SC2046
  env "${environment[@]}" "$runner" -n 2 --timeout 60s "$apps/tether-$2" --sizes "$sizes" --csv $(iterations_option "$1" "$2") \
    >"$results/tether-$1-$2.$3" 2>"$results/tether-$1-$2.$3.err" ||
    echo "# tether-$2 over $1 failed: $(tail -3 "$results/tether-$1-$2.$3.err")"
}

# mpi_app PATH APP ROUND: tether-mpi-APP under mpirun; PATH shm (Open MPI's default) or tcp
mpi_app() {
  local path_options=()
  [ "$1" = tcp ] && path_options=("${mpi_tcp[@]}")
  # shellcheck disable=SC2046
  timeout 90 mpirun "${mpi_common[@]}" "${path_options[@]}" "$apps/tether-mpi-$2" --sizes "$sizes" --csv $(iterations_option "$1" "$2") \
    >"$results/mpi-$1-$2.$3" 2>"$results/mpi-$1-$2.$3.err" ||
    echo "# tether-mpi-$2 over $1 failed: $(tail -3 "$results/mpi-$1-$2.$3.err")"
}

# transport_latency TRANSPORT PATH ROUND: the transport-level 8 B figure under the tether
# path that runs on TRANSPORT, if the bench prints one
transport_latency() {
  local bench="$build/transport/tether-bench-transport"
  [ -x "$bench" ] || return 0
  local domain=()
  [ "$2" = tcp ] && domain=(--domain lo)
  timeout 60 "$bench" --transport "$1" "${domain[@]}" --sizes 8 --bw-sizes "" --iterations 20000 --csv 2>/dev/null |
    awk -F, '/^latency_us/ { print "8," $3 }' >"$results/transport-$2.$3" || true
}

# fi_pingpong_latency PATH ROUND: libfabric's own 8 B ping-pong (libfabric-bin), the
# reference below tether's transport layer; usec/xfer is half the round trip
fi_port=47850
fi_pingpong_latency() {
  command -v fi_pingpong >/dev/null || return 0
  local provider=(-p shm) count=20000 server output
  [ "$1" = tcp ] && provider=(-p "tcp;ofi_rxm" -d lo) count=2000
  fi_port=$((fi_port + 1))
  on_bench_cpu 0 timeout 60 fi_pingpong "${provider[@]}" -e rdm -S 8 -I "$count" -B "$fi_port" >/dev/null 2>&1 &
  server=$!
  sleep 0.3
  output=$(on_bench_cpu 1 timeout 60 fi_pingpong "${provider[@]}" -e rdm -S 8 -I "$count" -P "$fi_port" \
    127.0.0.1 2>&1) || true
  wait "$server" || true
  awk '$1 == "bytes" { header = 1; next } header && NF >= 7 { print "8," $7 }' <<<"$output" >"$results/fi-$1.$2"
}

# best NAME SIZE min|max: the best figure at SIZE over the rounds of NAME
best() {
  { cat "$results/$1".[0-9]* 2>/dev/null || true; } | awk -F, -v size="$2" -v pick="$3" '
    $1 == size && $2 + 0 > 0 { if (!n++ || (pick == "min" ? $2 < v : $2 > v)) v = $2 }
    END { if (n) printf "%.2f", v; else printf "n/a" }'
}

for round in $(seq 1 "$rounds"); do
  for path in shm tcp; do
    for app in pingpong bw; do
      tether_app "$path" "$app" "$round"
      ((have_mpi)) && mpi_app "$path" "$app" "$round"
    done
  done
  transport_latency shm-own shm "$round"  # tether-run's on-node default
  transport_latency tcp-own tcp "$round"  # TETHER_SHM=off's default without an RDMA provider
  fi_pingpong_latency shm "$round"
  fi_pingpong_latency tcp "$round"
  # the on-node floor: a cache line bounced between two CPUs, as "size,latency" rows
  if [ -x "$apps/tether-bench-cache-line" ]; then
    { timeout 60 "$apps/tether-bench-cache-line" --csv 2>"$results/floor.$round.err" ||
      echo "# tether-bench-cache-line failed: $(tail -3 "$results/floor.$round.err")" >&2; } |
      awk -F, '$1 == "cache-line" { print "8," $3 }' >"$results/floor.$round"
  fi
  # the ceiling for one-copy bandwidth: memcpy of 1 MiB in one process, as "size,MB/s" rows
  if [ -x "$apps/tether-bench-copy" ]; then
    { timeout 60 "$apps/tether-bench-copy" --size 1M --csv 2>"$results/ceiling.$round.err" ||
      echo "# tether-bench-copy failed: $(tail -3 "$results/ceiling.$round.err")" >&2; } |
      awk -F, '$1 == "memcpy" { print $2 "," $4 }' >"$results/ceiling.$round"
  fi
done

# full_table NAME TITLE COLUMN min|max: the best-of-rounds table at every size
full_table() {
  printf '# %s\n# %-8s %16s\n' "$2" Size "$3"
  for size in ${sizes//,/ }; do printf '%-10s %16s\n' "$size" "$(best "$1" "$size" "$4")"; done
}
for path in shm tcp; do
  full_table "tether-$path-pingpong" "tether Latency Test ($path)" "Latency (us)" min
  full_table "tether-$path-bw" "tether Bandwidth Test ($path)" "Bandwidth (MB/s)" max
  if ((have_mpi)); then
    full_table "mpi-$path-pingpong" "Open MPI Latency Test ($path)" "Latency (us)" min
    full_table "mpi-$path-bw" "Open MPI Bandwidth Test ($path)" "Bandwidth (MB/s)" max
  fi
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'; }
# row PATH LABEL TETHER OMPI BAR
row() { printf '| %-7s | %-18s | %10s | %10s | %8s | %-22s |\n' "$1" "$2" "$3" "$4" "$(ratio "$3" "$4")" "$5"; }
echo
echo "# tether vs Open MPI, 2 ranks on $(hostname), best of $rounds rounds ($(date -u +%Y-%m-%dT%H:%MZ))"
echo "# ratio = tether / Open MPI: latency lower is better, bandwidth higher is better"
bench_tcp_congestion_note
printf '| %-7s | %-18s | %10s | %10s | %8s | %-22s |\n' Path Figure tether "Open MPI" ratio "bar"
echo "|---------|--------------------|------------|------------|----------|------------------------|"
for path in shm tcp; do
  label=$([ $path = shm ] && echo on-node || echo tcp)
  bar_latency=$([ $path = shm ] && echo "ratio <= 1.0" || echo "(no bar)")
  bar_bandwidth=$([ $path = shm ] && echo "ratio >= 1.0" || echo "(no bar)")
  row "$label" "8 B latency (us)" "$(best tether-$path-pingpong 8 min)" "$(best mpi-$path-pingpong 8 min)" "$bar_latency"
  row "$label" "1 MiB latency (us)" "$(best tether-$path-pingpong 1048576 min)" "$(best mpi-$path-pingpong 1048576 min)" "$bar_latency"
  row "$label" "1 MiB bw (MB/s)" "$(best tether-$path-bw 1048576 max)" "$(best mpi-$path-bw 1048576 max)" "$bar_bandwidth"
done
echo
echo "# 8 B one-way latency below tether's messaging layer, bar: tether / transport-level <= 1.2"
echo "# transport-level: tether-bench-transport (shm-own on-node, tcp-own); libfabric: fi_pingpong (shm, tcp;ofi_rxm)"
for path in shm tcp; do
  tether=$(best tether-$path-pingpong 8 min) transport_level=$(best transport-$path 8 min) libfabric=$(best fi-$path 8 min)
  printf '%-4s tether %s us | transport-level %s us, ratio %s | libfabric %s us, ratio %s\n' "$path" "$tether" \
    "$transport_level" "$(ratio "$tether" "$transport_level")" "$libfabric" "$(ratio "$tether" "$libfabric")"
done
[ "$(best transport-shm 8 min)" = n/a ] && echo "# transport-level n/a: tether-bench-transport missing or printed no figure"
echo "# on-node floor (tether-bench-cache-line: one cache line bounced between two CPUs): $(best floor 8 min) us;" \
  "tether's on-node 8 B is $(ratio "$(best tether-shm-pingpong 8 min)" "$(best floor 8 min)")x it"
ceiling=$(best ceiling 1048576 max)
echo "# on-node ceiling for one copy (tether-bench-copy: memcpy of 1 MiB in one process): $ceiling MB/s;" \
  "tether's on-node 1 MiB bw is $(ratio "$(best tether-shm-bw 1048576 max)" "$ceiling")x it, Open MPI's" \
  "$(ratio "$(best mpi-shm-bw 1048576 max)" "$ceiling")x"
exit 0
