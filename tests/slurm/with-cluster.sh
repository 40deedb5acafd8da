#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# with-cluster.sh NODES COMMAND [ARGS...]: brings up a private Slurm cluster of NODES (1 or
# 2) nodes (slurm-cluster.sh), runs COMMAND with SLURM_CONF pointing at it, tears the
# cluster down and exits with COMMAND's exit code. A cluster that cannot start fails the
# run with the daemons' log tails (exit 1), never a silent skip.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=slurm-cluster.sh
source "$here/slurm-cluster.sh"
nodes=$1
shift
started=$SECONDS
slurm_cluster_start "$nodes" || { echo "FAIL: the Slurm test cluster did not start (reason above)"; exit 1; }
echo "slurm-cluster: up in $((SECONDS - started))s"
"$@"
status=$?
slurm_cluster_stop
echo "slurm-cluster: exit code $status, down after $((SECONDS - started))s in total"
exit "$status"
