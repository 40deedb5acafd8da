#!/usr/bin/env bash
# osu_smoke.sh TETHER_RUN APP TITLE COLUMN [APP OPTIONS...]
# Runs APP on 2 ranks under tether-run for 8 B (eager) and 64 KiB (rendezvous) and checks
# the OSU-style table: the title, the column header, and one positive numeric row per size.
set -euo pipefail
run=$1 app=$2 title=$3 column=$4
shift 4
output=$("$run" -n 2 --timeout 50s "$app" --sizes 8,65536 --iterations 40 --warmup 4 "$@" 2>&1) || {
  echo "FAIL: $app exited non-zero"; echo "$output"; exit 1; }
echo "$output"
fail() { echo "FAIL: $*"; exit 1; }
if [[ " $* " == *" --csv "* ]]; then
  grep -qx "size_bytes,$column" <<<"$output" || fail "no CSV header 'size_bytes,$column'"
  pattern='^[0-9]+,[0-9]+\.[0-9]+$' separator=,
else
  grep -qx "# tether $title Test" <<<"$output" || fail "no '# tether $title Test' line"
  grep -qE "^# Size +$column\$" <<<"$output" || fail "no '# Size ... $column' header"
  pattern='^[0-9]+ +[0-9]+\.[0-9]+$' separator=' '
fi
sizes=$(grep -E "$pattern" <<<"$output" | awk -F"$separator" '$NF > 0 { printf "%s ", $1 }')
[ "$sizes" = "8 65536 " ] || fail "expected positive rows for sizes 8 and 65536, got '$sizes'"
echo "PASS"
