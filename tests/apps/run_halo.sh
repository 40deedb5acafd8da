#!/usr/bin/env bash
# run_halo.sh EXPECT LAUNCHER RANKS APP [ARGS...]: runs one halo app under LAUNCHER (mpirun
# or tether-run; both take --oversubscribe -n N) with a watchdog and checks the outcome.
# EXPECT is one of
#   verified          exit 0 and a "verified:" line
#   verified+TEXT     the same, and TEXT in the output (e.g. the mode chosen by default)
#   json              exit 0 and a JSON object with "verified": true
#   png=FILE          exit 0, verified, and FILE starts with the PNG signature
#   not-verified      non-zero exit and "NOT verified" (fault injection)
#   error=TEXT        non-zero exit and TEXT in the output (bad input, modes not built)
# HALO_TEST_LOG=FILE keeps the job's output in FILE for further checks (tests/slurm).
set -uo pipefail
expect=$1 launcher=$2 ranks=$3
shift 3
watchdog_s=${HALO_TEST_TIMEOUT_S:-100}
# shellcheck source=tests/support/ompi-session.sh
source "$(dirname "$0")/../support/ompi-session.sh"
output=$(timeout -k 5 "$watchdog_s" "$launcher" --oversubscribe -n "$ranks" "$@" 2>&1)
code=$?
[ -z "${HALO_TEST_LOG:-}" ] || printf '%s\n' "$output" >"$HALO_TEST_LOG"
fail() { printf '%s\n--- output (exit %s) ---\n%s\n' "FAIL: $1" "$code" "$output"; exit 1; }
if ((code == 124 || code == 137)); then fail "watchdog: no result after ${watchdog_s}s"; fi
case $expect in
  verified)
    ((code == 0)) || fail "exit code $code, expected 0"
    grep -q '^verified: ' <<<"$output" || fail "no 'verified:' line" ;;
  verified+*)
    ((code == 0)) || fail "exit code $code, expected 0"
    grep -q '^verified: ' <<<"$output" || fail "no 'verified:' line"
    grep -qF -- "${expect#verified+}" <<<"$output" || fail "output lacks '${expect#verified+}'" ;;
  json)
    ((code == 0)) || fail "exit code $code, expected 0"
    grep -q '^{.*"verified": true.*}$' <<<"$output" || fail "no JSON object with \"verified\": true" ;;
  png=*)
    file=${expect#png=}
    rm -f "$file"
    output=$(timeout -k 5 "$watchdog_s" "$launcher" --oversubscribe -n "$ranks" "$@" --png "$file" 2>&1)
    code=$?
    ((code == 0)) || fail "exit code $code, expected 0"
    grep -q "^png: heat map written to $file" <<<"$output" || fail "no 'png:' line naming $file"
    [ "$(head -c 8 "$file" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$file is not a PNG" ;;
  not-verified)
    ((code != 0)) || fail "exit code 0, expected a failure"
    grep -q 'NOT verified' <<<"$output" || fail "no 'NOT verified' line" ;;
  error=*)
    ((code != 0)) || fail "exit code 0, expected a failure"
    grep -qF -- "${expect#error=}" <<<"$output" || fail "output lacks '${expect#error=}'" ;;
  *) fail "unknown expectation '$expect'" ;;
esac
echo "PASS: $expect ($*)"
