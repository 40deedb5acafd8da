#!/usr/bin/env bash
# Runs halo2d with every built --comm mode side by side: one job per rank count and grid,
# in which the modes take turns on the same processes and memory (--comm mpi,persist,...
# --rounds REPEATS; each rank keeps each mode's fastest round). Prints an OSU-style table
# with each mode's speed-up over --comm mpi, and draws the comparison as a PNG with
# gnuplot. Separate jobs per mode compared luck as much as modes: on a 2-core VM one
# rank's stencil alone took 16.9-24.5 us per iteration from one job to the next. Not part
# of the tests; keep it short on shared machines.
#
#   apps/bench/halo-modes.sh [BUILD_DIR]        (default: build)
#
# Environment: RANKS ("2 4"), SIZES ("256 8000"), MODES (every built mode),
# ITERATIONS_SMALL (2000, for n <= 1024), ITERATIONS_LARGE (20: 5 left n=8000 within 2% noise),
# REPEATS (3: rounds per job, each mode's fastest kept), REPEATS_LARGE (12: rounds for n > 1024,
# where a round is 20 iterations of 20-30 ms and 3 left the ratio within 5% noise), OUT (BUILD_DIR/bench),
# LAUNCH (mpirun --oversubscribe: one launcher for tether and MPI modes alike).
set -euo pipefail
build=${1:-build}
halo2d=$build/apps/halo2d
[ -x "$halo2d" ] || { echo "run-bench: $halo2d not found; build first (ninja -C $build halo2d)" >&2; exit 2; }
ranks_list=${RANKS:-2 4}
sizes=${SIZES:-256 8000}
iterations_small=${ITERATIONS_SMALL:-2000}
iterations_large=${ITERATIONS_LARGE:-20}
repeats=${REPEATS:-3}
repeats_large=${REPEATS_LARGE:-12}
out=${OUT:-$build/bench}
launch=${LAUNCH:-mpirun --oversubscribe}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"

# Built modes, from the registry as --help prints it.
built_modes() {
  "$halo2d" --help | awk '/^  [a-z]/ && !/not built yet/ { print $1 }'
}
modes=${MODES:-$(built_modes | tr '\n' ' ')}
[[ " $modes " == *" mpi "* ]] || { echo "run-bench: the baseline mode mpi is not built" >&2; exit 2; }

# mpirun binds each rank to a core of its own when the ranks fit the cores: tether's ranks
# then need not yield on every poll (they cannot tell a mask of their own from a shared one).
launch_for() {  # ranks
  if [[ $launch == mpirun* ]] && (($1 <= $(nproc))); then echo "$launch -x TETHER_YIELD=off"; else echo "$launch"; fi
}

# One job with every mode: "mode median_us paired" per mode (median over ranks of each
# rank's fastest round; the paired speed-up over mpi, the first mode: median over rounds of
# the same round's ratio).
time_per_iteration_us() {  # ranks n iterations modes(comma-separated) rounds
  $(launch_for "$1") -n "$1" "$halo2d" --n "$2" --iterations "$3" --comm "$4" --rounds "$5" --csv --verify auto |
    awk -F, 'NR > 1 { if ($16 != "yes") { print "run-bench: --comm " $2 " was not verified" > "/dev/stderr"; exit 1 }
                      print $2, $11, $18 }' || {
    echo "run-bench: halo2d -n $1 --n $2 --comm $4 failed or was not verified" >&2; exit 1; }
}

data=$out/halo2d-modes.dat
{
  echo "# halo2d --comm modes in one job per row group, $repeats rounds ($repeats_large for n > 1024; each rank's" \
    "fastest), median over ranks;" \
    "speed-up = mpi time / mode time; paired = median over rounds of that ratio in the same round"
  printf '# %-8s %-6s %-12s %18s %16s %14s\n' Ranks N Comm "Iter median (us)" "Speed-up vs mpi" "Paired vs mpi"
} | tee "$data"
# The modes take turns within each round of the job, so a slow stretch of the machine
# falls on all of them.
ordered_modes=""
for mode in mpi ${modes//mpi /}; do [[ " $modes " == *" $mode "* ]] && ordered_modes+="$mode "; done
mode_list=${ordered_modes% }
mode_list=${mode_list// /,}
for ranks in $ranks_list; do
  for n in $sizes; do
    iterations=$iterations_small rounds=$repeats
    ((n <= 1024)) || iterations=$iterations_large rounds=$repeats_large
    declare -A best=() paired=()
    job=$(time_per_iteration_us "$ranks" "$n" "$iterations" "$mode_list" "$rounds")
    while read -r mode us ratio; do best[$mode]=$us paired[$mode]=$ratio; done <<<"$job"
    for mode in $ordered_modes; do
      [ -n "${best[$mode]:-}" ] || { echo "run-bench: the job printed no row for --comm $mode" >&2; exit 1; }
    done
    for mode in $ordered_modes; do
      printf '  %-8s %-6s %-12s %18.2f %16.3f %14.3f\n' "$ranks" "$n" "$mode" "${best[$mode]}" \
        "$(awk -v b="${best[mpi]}" -v t="${best[$mode]}" 'BEGIN { print b / t }')" "${paired[$mode]}" | tee -a "$data"
    done
    unset best paired
  done
done

if ! command -v gnuplot >/dev/null; then
  echo "run-bench: gnuplot not found, no PNG (apt-get install gnuplot-nox)" >&2
  exit 0
fi
# One row per (ranks, n), one column per mode: what gnuplot's clustered histogram reads.
matrix=$out/halo2d-modes.matrix
awk '!/^#/ { key = $1 " ranks, n=" $2; if (!(key in row)) order[++rows] = key
             if (!($3 in col)) { col[$3] = ++cols; name[cols] = $3 }
             row[key] = 1; ratio[key, col[$3]] = $5 }
     END { printf "case"; for (c = 1; c <= cols; c++) printf "\t%s", name[c]; print ""
           for (r = 1; r <= rows; r++) { printf "\"%s\"", order[r]
             for (c = 1; c <= cols; c++) printf "\t%s", ((order[r], c) in ratio) ? ratio[order[r], c] : "NaN"
             print "" } }' "$data" >"$matrix"
png=$out/halo2d-modes.png
gnuplot -e "matrix='$matrix'; png='$png'; columns=$(($(head -1 "$matrix" | wc -w)))" "$(dirname "$0")/plot-modes.gp"
echo "run-bench: table in $data, plot in $png"
