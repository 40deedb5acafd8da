#!/usr/bin/env bash
# halo_link_down_test.sh TETHER_RUN HALO2D: halo2d (persistent channels) on 3 ranks, one
# per test host; host 3's link is pulled 2 s into the run. With TETHER_PEER_TIMEOUT=3s a
# channel with rank 2 must fail with peer_unreachable naming rank 2 and host 3, and the
# job must end by itself with halo2d's "a halo app rank failed" exit code (3) within the
# timeout plus 3 s of slack after the pull (a 60 s watchdog catches hangs).
# Exit 0 = pass, 77 = skipped (not root), 1 = failed.
set -uo pipefail
tether_run=$1 halo2d=$2
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=3 slack_s=3
[ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
work=$(mktemp -d /tmp/tether-halo-link-down.XXXXXX)
trap 'rm -rf "$work"' EXIT  # set first: netns_create chains its cleanup in front of it
# shellcheck source=tests/netns/netns.sh
source "$here/netns.sh"
netns_create 3 || exit 1

fail() { printf 'FAIL: %s\n--- output ---\n%s\n' "$1" "$(cut -c1-600 "$work/out")"; exit 1; }

export TETHER_PEER_TIMEOUT=${timeout_s}s
timeout -k 5 60 "$tether_run" -n 3 --netns "$(netns_names)" --tag-output \
  "$halo2d" --n 64 --iterations 100000000 --verify none >"$work/out" 2>&1 &
job=$!
sleep 2
kill -0 "$job" 2>/dev/null || { wait "$job"; fail "halo2d ended before the link was pulled (exit $?)"; }
netns_link_down 3 || fail "could not pull host 3's link"
pulled=$SECONDS
wait "$job"
status=$? took=$((SECONDS - pulled))
((status != 124 && status != 137)) || fail "the job hung: stopped by the watchdog (exit $status)"
((status == 3)) || fail "tether-run exited with $status, expected 3 (a halo app rank failed)"
((took <= timeout_s + slack_s)) || fail "the job took $took s to end after the pull (want <= $((timeout_s + slack_s)))"
pattern="peer unreachable: (send|receive) channel with rank 2 \\(tag [0-9]+\\): rank 2 on host $(netns_name 3) is unreachable"
grep -qE "$pattern" "$work/out" || fail "no channel error naming rank 2 on host $(netns_name 3)"
echo "PASS: halo2d's channels with rank 2 failed naming it; the job ended with exit 3, $took s after the pull"
