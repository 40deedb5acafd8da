#!/usr/bin/env bash
# two_nodes_halo.sh HALO2D [ARGS...]: inside a two-node cluster (with-cluster.sh 2), runs
# halo2d as `srun --mpi=pmix -N 2 -n 4`, verified by tests/apps/run_halo.sh, then checks
# from the ranks' own log lines (TETHER_LOG_LEVEL=info) that the ranks ran on both hosts,
# two on each, and how they reached each other: per-peer lines ("rank A reaches rank B over
# T") must say shm-own on one host and tcp-own:... across hosts, every rank up on the hybrid
# transport over eth0 (the namespace's link, not lo).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; echo "--- job output"; cat "$log"; exit 1; }

export SRUN_LAUNCHER_OPTIONS="-N 2" TETHER_LOG_LEVEL=info HALO_TEST_LOG=$log
"$here/../apps/run_halo.sh" verified "$here/srun-launcher.sh" 4 "$@" || exit 1

# rank -> host, from "bootstrap INFO: rank R of 4 in job J on HOST (...)"
declare -A host_of
while read -r rank host; do host_of[$rank]=$host; done < <(
  sed -nE 's/.*bootstrap INFO: rank ([0-9]+) of 4 in job [^ ]+ on ([^ ]+) .*/\1 \2/p' "$log")
((${#host_of[@]} == 4)) || fail "expected a bootstrap line from each of 4 ranks, got ${#host_of[@]}"
placement=$(for rank in 0 1 2 3; do echo "${host_of[$rank]}"; done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
[ "$placement" = "node1:2 node2:2 " ] || fail "expected two ranks on node1 and two on node2, got '$placement'"
echo "placement: $placement(rank 0..3 on ${host_of[0]} ${host_of[1]} ${host_of[2]} ${host_of[3]})"

same_host_seen=0 cross_host_seen=0
check_peer_line() {  # check_peer_line A B TRANSPORT
  if [ "${host_of[$1]}" = "${host_of[$2]}" ]; then
    [ "$3" = shm-own ] || fail "rank $1 reaches rank $2 on the same host over $3, expected shm-own"
    same_host_seen=1
  else
    [[ "$3" == tcp-own:* ]] || fail "rank $1 reaches rank $2 on another host over $3, expected tcp-own:..."
    cross_host_seen=1
  fi
}

peer_lines=$(grep -oE 'rank [0-9]+ reaches rank [0-9]+ over [^ ]+' "$log")
[ -n "$peer_lines" ] || fail "no 'rank A reaches rank B over T' lines: the ranks did not log their routes"
up_hybrid=$(grep -cE 'runtime INFO: rank [0-3] of 4 up on hybrid\(shm-own\+tcp-own:eth0\)' "$log")
((up_hybrid == 4)) || fail "expected all 4 ranks up on hybrid(shm-own+tcp-own:eth0), $up_hybrid were"
while read -r _ a _ _ b _ transport; do check_peer_line "$a" "$b" "$transport"; done <<<"$peer_lines"
((same_host_seen && cross_host_seen)) || fail "expected both same-host and cross-host peer lines"
echo "PASS: halo2d verified on node1+node2, same host over shm-own, across hosts over tcp-own"
