#!/usr/bin/env bash
# apps/bench/persist-vs-mpi.sh [BUILD_DIR] [ROUNDS]
# tether's persistent channels against Open MPI's persistent requests on 2 ranks of this
# node, in one run: tether-bench-persist (channels and isend/irecv) under tether-run on-node
# (its default transport, shm-own), over libfabric shm (TETHER_SHM_TRANSPORT=ofi) and over
# tcp (TETHER_SHM=off: tcp-own on lo); tether-mpi-bench-persist under mpirun on-node (Open MPI's
# default) and over TCP (btl self,tcp, pml ob1, on lo). Each figure is the best of ROUNDS
# alternating runs, so load from other processes penalises both sides alike. Prints the
# figures at every size, then the issue's bars with ratios, then the on-node floor of the
# same run (tether-bench-cache-line: no on-node message can arrive sooner).
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
sizes=1,8,64,1024,8192,65536,1048576,4194304
# latency round trips at small sizes per path (the programs scale them down for large sizes):
# tens of milliseconds per size, so one timer interrupt or preemption moves a figure little
declare -A latency_iterations=([shm]=50000 [ofi-shm]=20000 [tcp]=5000)
# the Open MPI run each tether path is compared with
declare -A mpi_path=([shm]=shm [ofi-shm]=shm [tcp]=tcp)
# shellcheck source=apps/bench/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
bench_locate "$build" persist-vs-mpi.sh tether-bench-persist
have_mpi=1
if [ ! -x "$apps/tether-mpi-bench-persist" ] || ! command -v mpirun >/dev/null; then
  have_mpi=0
  echo "# no Open MPI baseline (apt-get install libopenmpi-dev openmpi-bin, then rebuild)"
fi
results=$(mktemp -d /tmp/tether-persist-bench.XXXXXX)
trap 'rm -rf "$results"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_common=(-n 2 --oversubscribe --mca oob_tcp_if_include lo --mca btl_base_warn_component_unused 0)
mpi_tcp=(--mca btl "self,tcp" --mca pml ob1 --mca btl_tcp_if_include lo)

# tether_run PATH ROUND: tether-bench-persist on 2 ranks; PATH shm, ofi-shm or tcp
tether_run() {
  local environment=(TETHER_SHM=on)
  [ "$1" = ofi-shm ] && environment=(TETHER_SHM=on TETHER_SHM_TRANSPORT=ofi)
  [ "$1" = tcp ] && environment=(TETHER_SHM=off TETHER_TCP_INTERFACE=lo TETHER_OFI_DOMAIN=lo)
  env "${environment[@]}" "$runner" -n 2 --timeout 180s "$apps/tether-bench-persist" --sizes "$sizes" --csv \
    --iterations "${latency_iterations[$1]}" >"$results/tether-$1.$2" 2>"$results/tether-$1.$2.err" ||
    echo "# tether-bench-persist over $1 failed: $(tail -3 "$results/tether-$1.$2.err")"
}

# mpi_run PATH ROUND: tether-mpi-bench-persist under mpirun; PATH shm (default) or tcp
mpi_run() {
  local path_options=()
  [ "$1" = tcp ] && path_options=("${mpi_tcp[@]}")
  timeout 240 mpirun "${mpi_common[@]}" "${path_options[@]}" "$apps/tether-mpi-bench-persist" --sizes "$sizes" \
    --csv --iterations "${latency_iterations[$1]}" >"$results/mpi-$1.$2" 2>"$results/mpi-$1.$2.err" ||
    echo "# tether-mpi-bench-persist over $1 failed: $(tail -3 "$results/mpi-$1.$2.err")"
}

# best RUN API SIZE latency|bandwidth: the best figure over the rounds of RUN (e.g. tether-shm)
best() {
  { cat "$results/$1".[0-9]* 2>/dev/null || true; } | awk -F, -v api="$2" -v size="$3" -v figure="$4" '
    $1 == api && $2 == size { v = figure == "latency" ? $3 : $4
      if (v + 0 > 0 && (!n++ || (figure == "latency" ? v < best : v > best))) best = v }
    END { if (n) printf "%.2f", best; else printf "n/a" }'
}

for round in $(seq 1 "$rounds"); do
  if [ -x "$apps/tether-bench-cache-line" ]; then
    timeout 60 "$apps/tether-bench-cache-line" --csv >"$results/floor.$round" 2>"$results/floor.$round.err" ||
      echo "# tether-bench-cache-line failed: $(tail -3 "$results/floor.$round.err")"
  fi
  if [ -x "$apps/tether-bench-copy" ]; then
    timeout 60 "$apps/tether-bench-copy" --size 1M --csv >"$results/ceiling.$round" 2>"$results/ceiling.$round.err" ||
      echo "# tether-bench-copy failed: $(tail -3 "$results/ceiling.$round.err")"
  fi
  for path in shm ofi-shm tcp; do
    tether_run "$path" "$round"
    if ((have_mpi)) && [ "$path" != ofi-shm ]; then mpi_run "$path" "$round"; fi
  done
done

# full_table PATH: every size, best of rounds: latency (us) and bandwidth (MB/s) per API
full_table() {
  local run_mpi="mpi-${mpi_path[$1]}"
  ((have_mpi)) || run_mpi=none
  printf '\n# %s: one-way latency (us) and bandwidth (MB/s), best of %s rounds\n' "$1" "$rounds"
  printf '# %-8s %12s %12s %12s %14s %14s %14s\n' Size "channel lat" "isend lat" "MPI lat" \
    "channel bw" "isend bw" "MPI bw"
  for size in ${sizes//,/ }; do
    printf '%-10s %12s %12s %12s %14s %14s %14s\n' "$size" \
      "$(best "tether-$1" channel "$size" latency)" "$(best "tether-$1" isend "$size" latency)" \
      "$(best "$run_mpi" persistent "$size" latency)" "$(best "tether-$1" channel "$size" bandwidth)" \
      "$(best "tether-$1" isend "$size" bandwidth)" "$(best "$run_mpi" persistent "$size" bandwidth)"
  done
}
echo "# tether persistent channels (channel), tether isend/irecv (isend), Open MPI persistent requests (MPI)"
full_table shm
full_table ofi-shm
full_table tcp

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'; }
# judge CHANNEL RATIO CHECK: met / missed / n/a / - for CHECK none, small-latency (channel
# <= 0.15 us and ratio <= 0.8), ratio<=LIMIT or ratio>=LIMIT
judge() {
  local limit=0.15 at_most=0.8 op="<=" value=$2
  case $3 in
    none) echo "-"; return ;;
    small-latency) ;;
    ratio\>=*) op=">=" limit=${3#ratio>=} at_most="" ;;
    ratio\<=*) limit=${3#ratio<=} at_most="" ;;
  esac
  [ "$3" = small-latency ] && value=$1
  awk -v v="$value" -v r="$2" -v op="$op" -v limit="$limit" -v at_most="$at_most" 'BEGIN {
    if (v == "n/a" || r == "n/a") { print "n/a"; exit }
    ok = op == "<=" ? v + 0 <= limit + 0 : v + 0 >= limit + 0
    if (at_most != "") ok = ok && r + 0 <= at_most + 0
    print ok ? "met" : "missed" }'
}
declare -A path_label=([shm]=on-node [ofi-shm]=ofi-shm [tcp]=tcp)
# row PATH FIGURE SIZE latency|bandwidth BAR CHECK: one line of the comparison
row() {
  local channel isend mpi ratio_mpi
  channel=$(best "tether-$1" channel "$3" "$4") isend=$(best "tether-$1" isend "$3" "$4")
  mpi=$(best "mpi-${mpi_path[$1]}" persistent "$3" "$4")
  ratio_mpi=$(ratio "$channel" "$mpi")
  printf '| %-7s | %-18s | %9s | %9s | %9s | %6s | %-34s | %-7s |\n' "${path_label[$1]}" \
    "$2" "$channel" "$isend" "$mpi" "$ratio_mpi" "$5" "$(judge "$channel" "$ratio_mpi" "$6")"
}

echo
echo "# tether channels vs Open MPI persistent requests, 2 ranks on $(hostname), best of $rounds rounds" \
  "($(date -u +%Y-%m-%dT%H:%MZ))"
echo "# ratio = tether channel / Open MPI persistent: latency lower is better, bandwidth higher is better"
echo "# on-node: tether-run's default (shm-own); ofi-shm: TETHER_SHM_TRANSPORT=ofi; both against Open MPI on-node"
bench_tcp_congestion_note
printf '| %-7s | %-18s | %9s | %9s | %9s | %6s | %-34s | %-7s |\n' Path Figure channel isend "Open MPI" ratio \
  "bar (issue #6)" verdict
echo "|---------|--------------------|-----------|-----------|-----------|--------|------------------------------------|---------|"
row shm "8 B latency (us)" 8 latency "<= 0.15 us and ratio <= 0.8" small-latency
row shm "1 MiB latency (us)" 1048576 latency "(none)" none
row shm "1 MiB bw (MB/s)" 1048576 bandwidth "ratio >= 1.5" "ratio>=1.5"
row ofi-shm "8 B latency (us)" 8 latency "(on-node bar, libfabric shm)" small-latency
row ofi-shm "1 MiB bw (MB/s)" 1048576 bandwidth "(on-node bar, libfabric shm)" "ratio>=1.5"
row tcp "8 B latency (us)" 8 latency "ratio <= 1.0 (no slower over tcp)" "ratio<=1.0"
row tcp "1 MiB latency (us)" 1048576 latency "ratio <= 1.0 (no slower over tcp)" "ratio<=1.0"
row tcp "1 MiB bw (MB/s)" 1048576 bandwidth "ratio >= 1.0 (no slower over tcp)" "ratio>=1.0"
floor=$(best floor cache-line 64 latency)
echo
echo "# on-node floor: one 64-byte cache line bounced between two CPUs (tether-bench-cache-line), best of" \
  "$rounds: $floor us; the channel's 8 B on-node latency is $(ratio "$(best tether-shm channel 8 latency)" "$floor")x it"
ceiling=$(best ceiling memcpy 1048576 bandwidth)
echo "# on-node ceiling for one copy: memcpy of 1 MiB in one process (tether-bench-copy), best of $rounds:" \
  "$ceiling MB/s; the channel's 1 MiB on-node bandwidth is $(ratio "$(best tether-shm channel 1048576 bandwidth)" \
  "$ceiling")x it, Open MPI's $(ratio "$(best mpi-shm persistent 1048576 bandwidth)" "$ceiling")x"
exit 0
