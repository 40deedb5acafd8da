#!/usr/bin/env bash
# cluster_failure.sh: a cluster whose daemons cannot start fails (exit 1) with the cause
# from their logs, and leaves no daemon and no state behind. The fault is real: a
# slurm.conf naming a select plugin that does not exist (SLURM_CLUSTER_EXTRA_CONF).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(mktemp -d /run/tether-slurm-failure.XXXXXX)
trap 'rm -rf "$root"' EXIT
output=$(SLURM_CLUSTER_ROOT=$root SLURM_CLUSTER_EXTRA_CONF="SelectType=select/no_such_plugin" \
  "$here/with-cluster.sh" 1 true 2>&1)
code=$?
fail() { printf 'FAIL: %s\n--- output (exit %s) ---\n%s\n' "$1" "$code" "$output"; exit 1; }
((code == 1)) || fail "exit code $code, expected 1"
grep -qF "the Slurm test cluster did not start" <<<"$output" || fail "no 'did not start' line"
grep -qF "Can't find plugin for select/no_such_plugin" <<<"$output" || fail "the daemons' log tail lacks the cause"
[ -z "$(ls -A "$root")" ] || fail "state left behind in $root: $(ls -A "$root")"
[ -z "$(find /proc/[0-9]*/fd -maxdepth 1 -lname "$root/*" 2>/dev/null)" ] || fail "a process still holds a file in $root"
echo "PASS: failed with the cause, nothing left behind"
