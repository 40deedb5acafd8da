#!/usr/bin/env bash
# persist_scenario.sh LAUNCHER RANKS PERSIST_CHECK SCENARIO [COUNT]: runs one
# tether-persist-check scenario (tests/persist) on RANKS ranks under LAUNCHER (tether-run,
# or srun-launcher.sh) and requires exit 0 and "rank R: SCENARIO passed" from every rank;
# the scenarios check the bytes that landed (e.g. integrity: a checksum per message).
set -uo pipefail
launcher=$1 ranks=$2 check=$3 scenario=$4
shift 4
output=$("$launcher" -n "$ranks" --timeout 100s "$check" "$scenario" "$@" 2>&1)
code=$?
fail() { printf 'FAIL: %s\n--- output (exit %s) ---\n%s\n' "$1" "$code" "$output"; exit 1; }
((code == 0)) || fail "exit code $code, expected 0"
for ((rank = 0; rank < ranks; rank++)); do
  grep -qF "rank $rank: $scenario passed" <<<"$output" || fail "no 'rank $rank: $scenario passed' line"
done
echo "PASS: $scenario on $ranks ranks"
