#!/usr/bin/env bash
# soak_test.sh TETHER_RUN SOAK_CHECK SECONDS: the soak on 2 ranks; both must pass and
# report zero mismatches.
set -uo pipefail
run=$1 check=$2 seconds=$3
output=$("$run" -n 2 --timeout "$((seconds + 60))s" "$check" "$seconds" 2>&1)
code=$?
echo "$output"
fail() { echo "FAIL: $*"; exit 1; }
((code == 0)) || fail "exit code $code"
for rank in 0 1; do
  grep -q "^rank $rank: soak passed$" <<<"$output" || fail "rank $rank did not pass"
  grep -qE "^rank $rank: [0-9]+ rounds, [0-9]+ messages, [0-9]+ bytes verified, 0 mismatches" <<<"$output" ||
    fail "rank $rank reported mismatches or no totals"
done
echo PASS
