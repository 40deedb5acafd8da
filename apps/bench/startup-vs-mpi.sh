#!/usr/bin/env bash
# apps/bench/startup-vs-mpi.sh [BUILD_DIR] [ROUNDS]
# Job start-up on this node, in one run: the wall time of a whole job (launch, every rank
# starts its runtime and meets the others at a barrier, exit) under tether-run
# (tether-bench-startup) against mpirun (tether-mpi-bench-startup: MPI_Init, MPI_Barrier,
# MPI_Finalize), on 1, 2 and 4 ranks, and each launcher starting /bin/true (the launcher
# alone). Rounds alternate the two sides; prints the best and the median of ROUNDS in ms.
# MPIRUN names Open MPI's mpirun (default: the one on PATH).
set -euo pipefail
build=${1:-build}
rounds=${2:-10}
# shellcheck source=apps/bench/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
bench_locate "$build" startup-vs-mpi.sh tether-bench-startup
have_mpi=1
mpirun=${MPIRUN:-mpirun}
if [ ! -x "$apps/tether-mpi-bench-startup" ] || ! command -v "$mpirun" >/dev/null; then
  have_mpi=0
  echo "# no Open MPI baseline (apt-get install libopenmpi-dev openmpi-bin, then rebuild)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
results=$(mktemp -d /tmp/tether-startup.XXXXXX)
trap 'rm -rf "$results"' EXIT

# timed NAME COMMAND...: appends the command's wall time in ms to $results/NAME; a failed
# run is reported and not counted
timed() {
  local name=$1 start end
  shift
  start=$(date +%s%N)
  if timeout 60 "$@" >/dev/null 2>"$results/$name.err"; then
    end=$(date +%s%N)
    echo $(((end - start) / 1000)) | awk '{ printf "%.1f\n", $1 / 1000 }' >>"$results/$name"
  else
    echo "# $name failed: $(tail -2 "$results/$name.err")"
  fi
}

# stats NAME: "best median" of the runs of NAME, or "n/a n/a"
stats() {
  sort -n "$results/$1" 2>/dev/null | awk '{ v[n++] = $1 }
    END { if (n) printf "%.1f %.1f", v[0], (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2); else printf "n/a n/a" }'
}

ranks_list=(1 2 4)
for _ in $(seq 1 "$rounds"); do
  for ranks in "${ranks_list[@]}"; do
    timed "tether-$ranks" "$runner" -n "$ranks" "$apps/tether-bench-startup"
    timed "tether-true-$ranks" "$runner" -n "$ranks" /bin/true
    if ((have_mpi)); then
      timed "mpi-$ranks" "$mpirun" -n "$ranks" --oversubscribe "$apps/tether-mpi-bench-startup"
      timed "mpi-true-$ranks" "$mpirun" -n "$ranks" --oversubscribe /bin/true
    fi
  done
done

echo "# tether start-up: whole jobs on this node, best and median of $rounds rounds (ms)"
printf "%-8s %-10s %12s %12s %12s %12s %8s\n" "# Ranks" "Program" "tether best" "tether med" "mpirun best" "mpirun med" "ratio"
for ranks in "${ranks_list[@]}"; do
  for program in runtime true; do
    suffix=$ranks
    [ "$program" = true ] && suffix=true-$ranks
    read -r tether_best tether_median <<<"$(stats "tether-$suffix")"
    read -r mpi_best mpi_median <<<"$(stats "mpi-$suffix")"
    ratio=$(awk -v t="$tether_median" -v m="$mpi_median" 'BEGIN { if (t + 0 > 0 && m + 0 > 0) printf "%.2f", t / m; else printf "n/a" }')
    printf "%-8s %-10s %12s %12s %12s %12s %8s\n" "$ranks" "$program" "$tether_best" "$tether_median" "$mpi_best" "$mpi_median" "$ratio"
  done
done
echo "# ratio: tether's median over mpirun's (below 1: tether starts faster). runtime: every rank"
echo "# starts its runtime and meets the others at a barrier; true: the launcher alone (/bin/true)."
