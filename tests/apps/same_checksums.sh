#!/usr/bin/env bash
# same_checksums.sh MPIEXEC "MODES" "RANK COUNTS" APP [ARGS...]: runs APP for every mode
# and rank count and checks that every run is verified and all final fields have the
# same checksum (bitwise-identical fields across --comm modes and process grids).
set -uo pipefail
mpiexec=$1 modes=$2 rank_counts=$3
shift 3
watchdog_s=${HALO_TEST_TIMEOUT_S:-100}
# shellcheck source=tests/support/ompi-session.sh
source "$(dirname "$0")/../support/ompi-session.sh"
first=""
for ranks in $rank_counts; do
  for mode in $modes; do
    output=$(timeout -k 5 "$watchdog_s" "$mpiexec" --oversubscribe -n "$ranks" "$@" --comm "$mode" 2>&1)
    code=$?
    checksum=$(sed -n 's/^# checksum \(0x[0-9a-f]*\)$/\1/p' <<<"$output")
    if ((code != 0)) || [ -z "$checksum" ]; then
      printf 'FAIL: %s ranks, --comm %s: exit %s\n%s\n' "$ranks" "$mode" "$code" "$output"
      exit 1
    fi
    echo "$ranks ranks, --comm $mode: checksum $checksum"
    first=${first:-$checksum}
    [ "$checksum" = "$first" ] || { echo "FAIL: checksum $checksum differs from $first"; exit 1; }
  done
done
echo "PASS: every mode and rank count gave checksum $first"
