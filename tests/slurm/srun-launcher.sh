#!/usr/bin/env bash
# srun-launcher.sh [tether-run options] PROGRAM [ARGS...]: runs PROGRAM under
# `srun --mpi=pmix`, taking the options the test scripts give tether-run and mpirun, so
# tests/bench/*.sh and tests/apps/run_halo.sh run unchanged under Slurm:
#   -n N | -np N        ranks             (srun -n N)
#   --oversubscribe     more ranks than CPUs (srun --overcommit; always on)
#   --timeout D         watchdog: the job is stopped after D (30s, 5m); exit code 124
# SRUN_LAUNCHER_OPTIONS adds srun options (e.g. "-N 2" to spread the ranks over two nodes).
# SLURM_CONF must name the cluster (tests/slurm/slurm-cluster.sh exports it).
set -euo pipefail
ranks="" timeout_d=""
while (($#)); do
  case $1 in
    -n | -np) ranks=$2; shift 2 ;;
    --oversubscribe) shift ;;
    --timeout) timeout_d=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "srun-launcher: option '$1' has no srun translation (use -n, --oversubscribe, --timeout)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ -n "$ranks" ] && (($#)) || { echo "usage: srun-launcher.sh -n N [--timeout D] PROGRAM [ARGS...]" >&2; exit 2; }
[ -n "${SLURM_CONF:-}" ] || { echo "srun-launcher: SLURM_CONF is not set: start a cluster first (tests/slurm/with-cluster.sh)" >&2; exit 2; }
# shellcheck disable=SC2206
extra=(${SRUN_LAUNCHER_OPTIONS:-})
command=(srun --mpi=pmix --overcommit --kill-on-bad-exit=1 --wait=30 "${extra[@]}" -n "$ranks" "$@")
if [ -n "$timeout_d" ]; then exec timeout -k 5 "$timeout_d" "${command[@]}"; fi
exec "${command[@]}"
