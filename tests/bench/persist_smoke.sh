#!/usr/bin/env bash
# persist_smoke.sh LAUNCHER APP TITLES [APP OPTIONS...]
# Runs tether-bench-persist or tether-mpi-bench-persist on 2 ranks under LAUNCHER
# (tether-run or mpirun) at 8 B and 64 KiB with tiny iteration counts. TITLES lists the
# APIs' table titles, separated by commas ("tether persistent channel,tether isend/irecv");
# each must print "# TITLE Latency Test" and "# TITLE Bandwidth Test" tables with the
# column header and one row per size (latencies positive). With --csv: the CSV header and rows. With
# --inject-fault corrupt: the run must fail verification with a non-zero exit code.
set -euo pipefail
run=$1 app=$2 titles=$3
shift 3
launch=("$run" -n 2 --timeout 50s)
if [ "$(basename "$run")" = mpirun ]; then
  # shellcheck source=tests/support/ompi-session.sh
  source "$(dirname "$0")/../support/ompi-session.sh"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  launch=("$run" -n 2 --oversubscribe --timeout 50 --mca oob_tcp_if_include lo --mca btl_base_warn_component_unused 0)
fi
fail() { echo "FAIL: $*"; exit 1; }
status=0
output=$("${launch[@]}" "$app" --sizes 8,65536 --iterations 40 --warmup 4 --bw-iterations 4 --bw-warmup 1 \
  --window 8 "$@" 2>&1) || status=$?
echo "$output"

if [[ " $* " == *" --inject-fault "* ]]; then
  [ "$status" -ne 0 ] || fail "a corrupted message was not noticed: exit code 0"
  grep -q "failed verification" <<<"$output" || fail "no 'failed verification' message"
  echo "PASS (exit code $status)"
  exit 0
fi
[ "$status" -eq 0 ] || fail "$app exited with $status"

# rows_of TITLE TEST: the size column of the rows of table "# TITLE TEST Test" whose figure
# is positive (latency) or present (bandwidth: 8 B over 4 windows can print 0.00 MB/s when
# a rank is descheduled on a loaded machine).
rows_of() {
  awk -v title="# $1 $2 Test" -v test="$2" '
    $0 == title { inside = 1; header = 0; next }
    inside && /^# Size/ { header = 1; next }
    inside && /^$/ { inside = 0 }
    inside && header && /^[0-9]+ +[0-9]+\.[0-9]+$/ && ($2 > 0 || test == "Bandwidth") { printf "%s ", $1 }' <<<"$output"
}

if [[ " $* " == *" --csv "* ]]; then
  grep -qx "api,size_bytes,latency_us,bandwidth_mbs" <<<"$output" || fail "no CSV header"
  rows=$(grep -cE '^[a-z]+,(8|65536),[0-9]+\.[0-9]+,[0-9]+\.[0-9]+$' <<<"$output" || true)
  expected=$((2 * $(tr ',' '\n' <<<"$titles" | wc -l)))
  [ "$rows" -eq "$expected" ] || fail "expected $expected CSV rows, got $rows"
  echo "PASS"
  exit 0
fi
IFS=, read -ra title_list <<<"$titles"
for title in "${title_list[@]}"; do
  for test in Latency Bandwidth; do
    grep -qx "# $title $test Test" <<<"$output" || fail "no '# $title $test Test' line"
    sizes=$(rows_of "$title" "$test")
    [ "$sizes" = "8 65536 " ] || fail "'$title $test': expected positive rows for 8 and 65536, got '$sizes'"
  done
done
grep -qE '^# Size +Latency \(us\)$' <<<"$output" || fail "no '# Size ... Latency (us)' header"
grep -qE '^# Size +Bandwidth \(MB/s\)$' <<<"$output" || fail "no '# Size ... Bandwidth (MB/s)' header"
echo "PASS"
