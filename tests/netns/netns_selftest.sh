#!/usr/bin/env bash
# netns_selftest.sh: checks tests/netns/netns.sh itself. Hosts reach each other and the
# bridge, UTS hostnames are their own, 100% loss and a pulled cable cut a host off and
# undoing them restores it, tbf applies, and cleanup leaves nothing behind when the test
# exits normally, fails, or is terminated; a SIGKILLed run is swept by the next one.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/netns.sh
source "$here/netns.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
# A TCP probe to a closed port: "connection refused" within 2 s means the packets went
# both ways; a timeout means they did not.
reaches() {  # reaches FROM_HOST ADDRESS
  local output
  output=$(netns_exec "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1)
  grep -q 'Connection refused' <<<"$output"
}
cut_off() { ! reaches "$@"; }
rejects() { ! "$@" 2>/dev/null; }
has_address() { netns_exec "$1" ip -4 -o addr show dev eth0 | grep -q " $(netns_addr "$1")/24"; }
leftovers() {  # leftovers RUN_ID: prints anything named for that run
  { ip netns list | grep -E "^tether-$1-"; ip -o link show | grep -E "tt[bvp]$1"; ls "$NETNS_STATE_DIR" 2>/dev/null | grep -E "^tether-$1-"; } 2>/dev/null
}
nothing_left() { [ -z "$(leftovers "$1")" ]; }

netns_create 3 --hostnames alpha,beta,gamma || exit 1
run_id=$NETNS_RUN_ID
check "three hosts named in netns_names" [ "$(netns_names | tr ',' '\n' | wc -l)" = 3 ]
check "host 2 has address $(netns_addr 2) on eth0" has_address 2
check "host 2's hostname is beta" [ "$(netns_exec 2 hostname)" = beta ]
check "the root hostname is unchanged" [ "$(hostname)" != beta ]
check "host 1 reaches host 2" reaches 1 "$(netns_addr 2)"
check "host 3 reaches the bridge" reaches 3 "$NETNS_SUBNET.1"
check "host 1's loopback is up" reaches 1 127.0.0.1

netns_loss 2 100
check "100% loss on host 2 cuts it off" cut_off 1 "$(netns_addr 2)"
check "loss on host 2 leaves host 1 to host 3 alone" reaches 1 "$(netns_addr 3)"
check "loss on host 2 spares its loopback" reaches 2 127.0.0.1
netns_loss 2 0
check "loss 0 restores host 2" reaches 1 "$(netns_addr 2)"

netns_link_down 3
check "host 3's link down cuts it off" cut_off 1 "$(netns_addr 3)"
netns_link_up 3
sleep 1
check "host 3's link up restores it" reaches 1 "$(netns_addr 3)"

check "tbf rate on host 1" netns_rate 1 20mbit
check "tbf qdisc in place" bash -c "tc qdisc show dev ${NETNS_ROOT_VETHS[1]} | grep -q tbf"
check "a bad rate is rejected" rejects netns_rate 1 fast
check "host 1 still reaches host 2 under tbf" reaches 1 "$(netns_addr 2)"
check "rate off" netns_rate 1 off
check "an unknown host index is an error" rejects netns_name 9

netns_cleanup
check "cleanup leaves nothing of run $run_id" nothing_left "$run_id"

# Cleanup on a failing test, on SIGTERM, and the sweep after SIGKILL.
child_run() {  # child_run HOW: a child shell that creates 2 hosts then ends HOW
  bash -c "source $here/netns.sh; netns_create 2 --uts || exit 9; echo \$NETNS_RUN_ID; $1"
}
failed_id=$(child_run 'exit 3')
check "a failing test (exit 3) cleans up run $failed_id" nothing_left "$failed_id"
term_id_file=$(mktemp)
bash -c "source $here/netns.sh; netns_create 2 || exit 9; echo \$NETNS_RUN_ID >$term_id_file; netns_exec 1 sleep 30 & wait" &
child=$!
for _ in $(seq 50); do [ -s "$term_id_file" ] && break; sleep 0.1; done
kill -TERM "$child"; wait "$child" 2>/dev/null
check "a SIGTERMed test cleans up run $(cat "$term_id_file")" nothing_left "$(cat "$term_id_file")"
: >"$term_id_file"
bash -c "source $here/netns.sh; netns_create 2 || exit 9; echo \$NETNS_RUN_ID >$term_id_file; netns_exec 1 sleep 30 & wait" &
child=$!
for _ in $(seq 50); do [ -s "$term_id_file" ] && break; sleep 0.1; done
killed_id=$(cat "$term_id_file")
kill -KILL "$child"; wait "$child" 2>/dev/null
check "a SIGKILLed run leaves hosts behind" bash -c "ip netns list | grep -q '^tether-$killed_id-'"
netns_sweep_stale
check "the next run sweeps run $killed_id" nothing_left "$killed_id"
rm -f "$term_id_file"

((failures == 0)) && echo "netns self-test: all checks passed" || echo "netns self-test: $failures check(s) failed"
((failures == 0))
