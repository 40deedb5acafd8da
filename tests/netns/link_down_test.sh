#!/usr/bin/env bash
# link_down_test.sh TETHER_RUN LINK_DOWN_CHECK: 3 test hosts, one rank on each; host 3's
# link is pulled while rank 0 exchanges with ranks 1 and 2 (link_down_check.cpp). Passes
# when, with TETHER_PEER_TIMEOUT=3s:
#   - rank 0's request with rank 2 fails with peer_unreachable naming rank 2 and host 3,
#     no sooner than the timeout after rank 2's last message and within the timeout
#     (plus 2 s of scheduling slack) of the link going down;
#   - rank 2 likewise reports rank 0 on host 1 unreachable;
#   - ranks 0 and 1 keep exchanging verified messages afterwards;
#   - the job ends by itself (a 60 s watchdog catches hangs) with exit code 1, tether-run
#     naming rank 2 as ended without finalizing: its host lost the PMIx server too.
# Exit 0 = pass, 77 = skipped (not root), 1 = failed.
set -uo pipefail
tether_run=$1 checker=$2
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=3 slack_s=2
[ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
work=$(mktemp -d /tmp/tether-link-down.XXXXXX)
trap 'rm -rf "$work"' EXIT  # set first: netns_create chains its cleanup in front of it
# shellcheck source=tests/netns/netns.sh
source "$here/netns.sh"
netns_create 3 || exit 1

fail() { printf 'FAIL: %s\n--- output ---\n%s\n' "$1" "$(cat "$work/out")"; exit 1; }

export TETHER_PEER_TIMEOUT=${timeout_s}s
timeout -k 5 60 "$tether_run" -n 3 --netns "$(netns_names)" --timeout 50s --tag-output \
  "$checker" "$work/marker" >"$work/out" 2>&1 &
job=$!
for ((i = 0; i < 300; i++)); do [ -e "$work/marker" ] && break; sleep 0.1; done
[ -e "$work/marker" ] || { kill "$job"; wait "$job"; fail "rank 0 did not start exchanging within 30 s"; }
down_at=$(date +%s.%N)
netns_link_down 3 || fail "could not pull host 3's link"
echo "host 3's link is down"
wait "$job"
status=$?
((status != 124 && status != 137)) || fail "the job hung: stopped by the watchdog (exit $status)"
((status == 1)) || fail "tether-run exited with $status, expected 1 (rank 2 could not finalize)"
grep -qE "job failed: rank 2 \(pid [0-9]+\) exited with code 0 without finalizing" "$work/out" ||
  fail "tether-run did not name rank 2 as ended without finalizing"

# lost LOSER PEER PEER_HOST: the loss line, checked for the error and its timing.
lost() {
  local line detected quiet
  line=$(grep -E "rank $1 lost rank $2 at " "$work/out") || fail "rank $1 never reported losing rank $2"
  grep -qE "peer unreachable: (send|receive) with rank $2 failed: rank $2 on host $3 is unreachable" <<<"$line" ||
    fail "rank $1's error does not name rank $2 on host $3 as unreachable"
  detected=$(sed -E 's/.* at ([0-9.]+), .*/\1/' <<<"$line")
  quiet=$(sed -E 's/.*, ([0-9.]+) s after its last message.*/\1/' <<<"$line")
  awk -v d="$detected" -v down="$down_at" -v q="$quiet" -v t="$timeout_s" -v s="$slack_s" \
    'BEGIN { exit !(q >= t * 0.9 && d - down <= t + s) }' ||
    fail "rank $1 lost rank $2 after $quiet s of quiet, $(awk -v d="$detected" -v down="$down_at" \
      'BEGIN { printf "%.2f", d - down }') s after the link went down (want >= 0.9*$timeout_s and <= $timeout_s+$slack_s)"
  echo "PASS: rank $1 lost rank $2 after $quiet s of quiet: ${line#*: }"
}
lost 0 2 "$(netns_name 3)"
lost 2 0 "$(netns_name 1)"
grep -q "verified: rank 0 exchanged with rank 1 through 100 rounds after losing rank 2" "$work/out" ||
  fail "ranks 0 and 1 did not keep exchanging after host 3 was lost"
echo "PASS: ranks 0 and 1 kept exchanging verified messages"
