#!/usr/bin/env bash
# launch_errors.sh PROGRAM: inside a cluster (with-cluster.sh 1), the two mistakes
# launch/README.md documents give the errors it quotes:
#  1. Slurm without its PMIx plugin (a PluginDir of links to every plugin but mpi_pmix*):
#     `srun --mpi=pmix` fails with "Invalid MPI type 'pmix'".
#  2. srun without --mpi=pmix: the tether program fails with "no PMIx server to connect to".
set -uo pipefail
program=$1
fail() { printf 'FAIL: %s\n--- output (exit %s) ---\n%s\n' "$1" "$code" "$output"; exit 1; }
plugins=$(mktemp -d)
trap 'rm -rf "$plugins"' EXIT

plugin_dir=$(scontrol show config | awk '$1 == "PluginDir" {print $3}')
[ -e "$plugin_dir/mpi_pmix.so" ] || { code=-; output=""; fail "no mpi_pmix.so in Slurm's PluginDir '$plugin_dir'"; }
for plugin in "$plugin_dir"/*.so; do
  [[ "$(basename "$plugin")" == mpi_pmix* ]] || ln -s "$plugin" "$plugins/"
done
mkdir -p "$plugins/conf"
{ cat "$SLURM_CONF"; echo "PluginDir=$plugins"; } >"$plugins/conf/slurm.conf"
output=$(SLURM_CONF=$plugins/conf/slurm.conf timeout 60 srun --mpi=pmix -n 1 true 2>&1)
code=$?
((code != 0)) || fail "srun --mpi=pmix without the PMIx plugin exited 0"
grep -qF "Invalid MPI type 'pmix', --mpi=list for acceptable types" <<<"$output" || fail "no 'Invalid MPI type' error"
echo "without the plugin: $(grep -F 'Invalid MPI type' <<<"$output")"

output=$(timeout 60 srun --mpi=none -n 1 "$program" 2>&1)
code=$?
((code != 0)) || fail "$program under srun --mpi=none exited 0"
grep -qF "no PMIx server to connect to" <<<"$output" || fail "no 'no PMIx server to connect to' error"
echo "without --mpi=pmix: exit code $code, 'no PMIx server to connect to'"
echo "PASS"
