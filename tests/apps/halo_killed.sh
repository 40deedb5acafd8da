#!/usr/bin/env bash
# halo_killed.sh TETHER_RUN HALO2D MODE: halo2d on 4 ranks where rank 1 kills itself with
# SIGKILL halfway through the exchanges (--inject-fault killed). The launcher must exit
# non-zero naming rank 1 and the signal; every survivor must report that rank 1 died (or
# be stopped by the abort of a neighbour that failed first), and a neighbour whose
# exchange broke must name it (with --comm persist, the channel); the job must end within
# TETHER_PEER_TIMEOUT (10 s here) plus start-up; nothing may be left in /dev/shm, and the
# launcher's private directory (PMIx sockets) must be gone.
set -uo pipefail
run=$1 halo2d=$2 mode=$3
fail() { printf 'FAIL: %s\n--- output (exit %s) ---\n%s\n' "$1" "$code" "$output"; exit 1; }
shm_before=$(ls /dev/shm | sort)
run_dir=$(mktemp -d)
trap 'rm -rf "$run_dir"' EXIT
started=$SECONDS
output=$(TETHER_LOG_LEVEL=warn TETHER_PEER_TIMEOUT=10s TETHER_RUN_TMPDIR="$run_dir" timeout -k 5 90 \
  "$run" -n 4 --timeout 80s "$halo2d" --n 256 --iterations 400 --comm "$mode" --inject-fault killed 2>&1)
code=$?
elapsed=$((SECONDS - started))
((code != 0 && code != 124)) || fail "exit code $code: expected a failure, not success or the watchdog"
grep -qE 'job failed: rank 1 \(pid [0-9]+\) was killed by signal 9' <<<"$output" || fail "the launcher did not name rank 1 and SIGKILL"
what="with rank 1"
[ "$mode" = persist ] && what="channel with rank 1"
# A survivor either reports the death or was stopped first by the job's abort (the halo
# apps abort the job when their exchange fails).
stopped=$(grep -oE 'sent SIGTERM to ranks [0-9,]+' <<<"$output" | head -1)
for rank in 0 2 3; do
  grep -qE "^\[[^]]*:[0-9]+:$rank\] runtime WARN: rank 1 died \(.*killed by signal 9" <<<"$output" && continue
  grep -qE "ranks ([0-9]+,)*$rank(,|$)" <<<"${stopped#sent SIGTERM to }" ||
    fail "rank $rank neither reported that rank 1 died nor was stopped by the abort"
done
grep -E '^\[[^]]*:[0-9]+:[023]\] apps ERROR' <<<"$output" | grep -qF "$what" ||
  fail "no survivor's failure names the $what"
((elapsed <= 30)) || fail "the job took ${elapsed} s to end: more than TETHER_PEER_TIMEOUT=10s plus 20 s"
leftovers=$(comm -13 <(echo "$shm_before") <(ls /dev/shm | sort))
[ -z "$leftovers" ] || fail "left in /dev/shm: $leftovers"
[ -z "$(ls -A "$run_dir")" ] || fail "left in the launcher's directory: $(ls -A "$run_dir")"
echo "PASS: rank 1 killed mid-exchange ($mode): launcher and survivors named it within ${elapsed} s," \
  "/dev/shm and the launcher's directory clean"
