#!/usr/bin/env bash
# osu_smoke.sh LAUNCHER APP TITLE COLUMN [APP OPTIONS...]
# Runs APP on 2 ranks under LAUNCHER (tether-run or mpirun) for 8 B (eager) and 64 KiB
# (rendezvous) and checks the OSU-style table: the title line ("# TITLE Test"), the column
# header, and one positive numeric row per size.
set -euo pipefail
run=$1 app=$2 title=$3 column=$4
shift 4
launch=("$run" -n 2 --timeout 50s)
if [ "$(basename "$run")" = mpirun ]; then
  # shellcheck source=tests/support/ompi-session.sh
  source "$(dirname "$0")/../support/ompi-session.sh"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  launch=("$run" -n 2 --timeout 50 --mca oob_tcp_if_include lo --mca btl_base_warn_component_unused 0)
fi
output=$("${launch[@]}" "$app" --sizes 8,65536 --iterations 40 --warmup 4 "$@" 2>&1) || {
  echo "FAIL: $app exited non-zero"; echo "$output"; exit 1; }
echo "$output"
fail() { echo "FAIL: $*"; exit 1; }
if [[ " $* " == *" --csv "* ]]; then
  grep -qx "size_bytes,$column" <<<"$output" || fail "no CSV header 'size_bytes,$column'"
  pattern='^[0-9]+,[0-9]+\.[0-9]+$' separator=,
else
  grep -qx "# $title Test" <<<"$output" || fail "no '# $title Test' line"
  grep -qE "^# Size +$column\$" <<<"$output" || fail "no '# Size ... $column' header"
  pattern='^[0-9]+ +[0-9]+\.[0-9]+$' separator=' '
fi
sizes=$(grep -E "$pattern" <<<"$output" | awk -F"$separator" '$NF > 0 { printf "%s ", $1 }')
[ "$sizes" = "8 65536 " ] || fail "expected positive rows for sizes 8 and 65536, got '$sizes'"
echo "PASS"
