#!/usr/bin/env bash
# same_checksums.sh MPIEXEC "MODES" "RANK COUNTS" APP [ARGS...]: runs APP once per rank
# count with every mode taking turns in the job (--comm a,b,...: the app verifies each
# mode's field and fails unless they are bitwise identical) and checks that every mode was
# verified and the field's checksum is the same for every process grid.
set -uo pipefail
mpiexec=$1 modes=$2 rank_counts=$3
shift 3
watchdog_s=${HALO_TEST_TIMEOUT_S:-100}
# shellcheck source=tests/support/ompi-session.sh
source "$(dirname "$0")/../support/ompi-session.sh"
first=""
mode_list=$(tr ' ' ',' <<<"$modes")
for ranks in $rank_counts; do
  output=$(timeout -k 5 "$watchdog_s" "$mpiexec" --oversubscribe -n "$ranks" "$@" --comm "$mode_list" 2>&1)
  code=$?
  checksum=$(sed -n 's/^# checksum \(0x[0-9a-f]*\)$/\1/p' <<<"$output")
  if ((code != 0)) || [ -z "$checksum" ]; then
    printf 'FAIL: %s ranks, --comm %s: exit %s\n%s\n' "$ranks" "$mode_list" "$code" "$output"
    exit 1
  fi
  for mode in $modes; do
    grep -q "^verified: $mode: " <<<"$output" || { printf 'FAIL: %s ranks: --comm %s not verified\n%s\n' \
      "$ranks" "$mode" "$output"; exit 1; }
  done
  echo "$ranks ranks, --comm $mode_list: checksum $checksum"
  first=${first:-$checksum}
  [ "$checksum" = "$first" ] || { echo "FAIL: checksum $checksum differs from $first"; exit 1; }
done
echo "PASS: every mode and rank count gave checksum $first"
