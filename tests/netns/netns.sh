# shellcheck shell=bash
# netns.sh: several test hosts on one machine, as network namespaces joined by veth pairs
# to a bridge. Source it, then:
#
#   netns_create 3 [--uts] [--hostnames a,b,c]   hosts 1..3, cleanup trap installed
#   netns_exec 2 some-command args               run a command inside host 2
#   netns_addr 2 / netns_name 2 / netns_names    address, namespace name, "ns1,ns2,..."
#   netns_loss 2 5       drop 5% of host 2's packets, both directions (0: stop)
#   netns_rate 2 20mbit  limit host 2's link, both directions (off: stop)
#   netns_link_down 2 / netns_link_up 2          pull / plug host 2's cable
#   netns_cleanup                                 remove everything this run created
#
# Every name carries the creating shell's pid, so parallel runs never collide; each run
# takes its own 10.77.X.0/24 (the bridge in the root namespace is .1, host i is .(1+i)).
# Inside each host the link is called eth0. See tests/netns/README.md.

NETNS_STATE_DIR=${NETNS_STATE_DIR:-/run/tether-netns}
NETNS_RUN_ID=""          # pid of the shell that called netns_create
NETNS_SUBNET=""          # e.g. 10.77.5 (first three octets)
NETNS_BRIDGE=""
NETNS_USE_UTS=0
NETNS_HOSTS=()           # namespace names, index 1..N
NETNS_HOSTNAMES=()       # UTS hostnames when --uts, index 1..N
NETNS_ROOT_VETHS=()      # bridge-side veth ends, index 1..N

netns_fail() { echo "netns: $*" >&2; return 1; }

netns_require_tools() {
  local tool
  for tool in ip nft tc nsenter unshare flock; do
    command -v "$tool" >/dev/null 2>&1 ||
      netns_fail "'$tool' is missing: run 'bash .ci/install-deps' (iproute2, nftables, util-linux)" || return 1
  done
  [ "$(id -u)" -eq 0 ] || netns_fail "network namespaces need root (CAP_NET_ADMIN); run as root" || return 1
}

netns_check_index() {
  [[ "$1" =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 < ${#NETNS_HOSTS[@]})) ||
    netns_fail "host '$1' does not exist: this run has hosts 1..$((${#NETNS_HOSTS[@]} - 1))"
}

netns_name() { netns_check_index "$1" && echo "${NETNS_HOSTS[$1]}"; }
netns_addr() { netns_check_index "$1" && echo "$NETNS_SUBNET.$((1 + $1))"; }
netns_count() { echo $((${#NETNS_HOSTS[@]} - 1)); }
netns_names() { local IFS=,; echo "${NETNS_HOSTS[*]:1}"; }
netns_uts_file() { echo "$NETNS_STATE_DIR/$1.uts"; }

# --- creation --------------------------------------------------------------------------

netns_pick_subnet() {  # prints a free X for 10.77.X.0/24; caller holds the lock
  local used x
  used=$(ip -4 -o addr show | awk '{print $4}')
  for x in $(seq 1 254); do
    grep -q "^10\.77\.$x\." <<<"$used" || { echo "$x"; return 0; }
  done
  netns_fail "every 10.77.X.0/24 subnet is in use: remove stale bridges (ip link show type bridge)"
}

netns_create_bridge() {
  local x
  mkdir -p "$NETNS_STATE_DIR" || return 1
  exec {NETNS_LOCK_FD}>"$NETNS_STATE_DIR/lock"
  flock "$NETNS_LOCK_FD"
  x=$(netns_pick_subnet) && NETNS_SUBNET=10.77.$x &&
    ip link add "$NETNS_BRIDGE" type bridge &&
    ip addr add "$NETNS_SUBNET.1/24" dev "$NETNS_BRIDGE" &&
    ip link set "$NETNS_BRIDGE" up
  local status=$?
  flock -u "$NETNS_LOCK_FD"; exec {NETNS_LOCK_FD}>&-
  return $status
}

netns_create_uts() {  # netns_create_uts NAME HOSTNAME: a persistent UTS namespace
  local file
  file=$(netns_uts_file "$1")
  touch "$file" && unshare --uts="$file" hostname "$2" ||
    netns_fail "could not create a UTS namespace for $1 at $file"
}

netns_create_host() {  # netns_create_host INDEX
  local i=$1 name="tether-$NETNS_RUN_ID-h$1" root_end="ttv$NETNS_RUN_ID""h$1" host_end="ttp$NETNS_RUN_ID""h$1"
  NETNS_HOSTS[i]=$name
  NETNS_ROOT_VETHS[i]=$root_end
  ip netns add "$name" &&
    ip link add "$root_end" type veth peer name "$host_end" &&
    ip link set "$host_end" netns "$name" &&
    ip -n "$name" link set "$host_end" name eth0 &&
    ip -n "$name" addr add "$(netns_addr "$i")/24" dev eth0 &&
    ip -n "$name" link set lo up &&
    ip -n "$name" link set eth0 up &&
    ip link set "$root_end" master "$NETNS_BRIDGE" up || return 1
  if ((NETNS_USE_UTS)); then netns_create_uts "$name" "${NETNS_HOSTNAMES[i]}" || return 1; fi
}

netns_parse_options() {  # netns_parse_options N [--uts] [--hostnames a,b,...]
  local count=$1 names=""; shift
  [[ "$count" =~ ^[0-9]+$ ]] && ((count >= 1 && count <= 60)) ||
    netns_fail "netns_create: host count '$count' must be 1..60" || return 1
  while (($#)); do
    case $1 in
      --uts) NETNS_USE_UTS=1 ;;
      --hostnames) NETNS_USE_UTS=1; names=$2; shift ;;
      *) netns_fail "netns_create: unknown option '$1' (use --uts, --hostnames a,b,...)"; return 1 ;;
    esac
    shift
  done
  local -a list=()
  [ -n "$names" ] && IFS=, read -r -a list <<<"$names"
  [ -z "$names" ] || ((${#list[@]} == count)) ||
    netns_fail "netns_create: --hostnames lists ${#list[@]} names for $count hosts" || return 1
  NETNS_HOSTNAMES=("")
  local i
  for ((i = 1; i <= count; i++)); do NETNS_HOSTNAMES[i]=${list[i - 1]:-tether-h$i}; done
}

netns_install_trap() {  # keeps any EXIT trap the caller already had
  local previous
  previous=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT$//")
  # shellcheck disable=SC2064
  trap "netns_cleanup; $previous" EXIT
  [ -n "$(trap -p INT)" ] || trap 'exit 130' INT
  [ -n "$(trap -p TERM)" ] || trap 'exit 143' TERM
}

netns_create() {  # netns_create N [--uts] [--hostnames a,b,...]
  netns_require_tools || return 1
  [ -z "$NETNS_RUN_ID" ] || netns_fail "netns_create: this shell already has hosts; call netns_cleanup first" || return 1
  netns_parse_options "$@" || return 1
  netns_sweep_stale
  NETNS_RUN_ID=$BASHPID
  NETNS_BRIDGE="ttb$NETNS_RUN_ID"
  NETNS_HOSTS=("") NETNS_ROOT_VETHS=("")
  netns_install_trap
  netns_create_bridge || { netns_cleanup; netns_fail "could not create bridge $NETNS_BRIDGE"; return 1; }
  local i
  for ((i = 1; i <= $1; i++)); do
    netns_create_host "$i" || { netns_cleanup; netns_fail "could not create host $i"; return 1; }
  done
}

# --- running commands -------------------------------------------------------------------

netns_exec() {  # netns_exec INDEX COMMAND [ARGS...]
  local name
  name=$(netns_name "$1") || return 1
  shift
  if ((NETNS_USE_UTS)); then
    nsenter --net="/run/netns/$name" --uts="$(netns_uts_file "$name")" -- "$@"
  else
    nsenter --net="/run/netns/$name" -- "$@"
  fi
}

# --- faults -----------------------------------------------------------------------------

netns_loss() {  # netns_loss INDEX PERCENT: random drop of PERCENT% in and out of eth0
  local name percent=$2
  name=$(netns_name "$1") || return 1
  [[ "$percent" =~ ^[0-9]+$ ]] && ((percent <= 100)) || netns_fail "netns_loss: '$percent' is not 0..100" || return 1
  netns_exec "$1" nft list table inet tether_loss >/dev/null 2>&1 && netns_exec "$1" nft delete table inet tether_loss
  ((percent == 0)) && return 0
  netns_exec "$1" nft -f - <<EOF
table inet tether_loss {
  chain incoming { type filter hook input priority 0; iifname "eth0" numgen random mod 100 <= $((percent - 1)) drop; }
  chain outgoing { type filter hook output priority 0; oifname "eth0" numgen random mod 100 <= $((percent - 1)) drop; }
}
EOF
}

netns_rate() {  # netns_rate INDEX RATE|off: token bucket on both ends of the host's link
  local i=$1 rate=$2
  netns_check_index "$i" || return 1
  if [ "$rate" = off ]; then
    netns_exec "$i" tc qdisc del dev eth0 root 2>/dev/null
    tc qdisc del dev "${NETNS_ROOT_VETHS[i]}" root 2>/dev/null
    return 0
  fi
  netns_exec "$i" tc qdisc replace dev eth0 root tbf rate "$rate" burst 64kb latency 400ms &&
    tc qdisc replace dev "${NETNS_ROOT_VETHS[i]}" root tbf rate "$rate" burst 64kb latency 400ms ||
    netns_fail "netns_rate: tc rejected rate '$rate' (use e.g. 20mbit, 512kbit)"
}

netns_link_down() { netns_check_index "$1" && ip link set "${NETNS_ROOT_VETHS[$1]}" down; }
netns_link_up() { netns_check_index "$1" && ip link set "${NETNS_ROOT_VETHS[$1]}" up; }

# --- cleanup ----------------------------------------------------------------------------

netns_remove_host() {  # netns_remove_host NAME ROOT_VETH: processes, nft, uts, ns, veth
  local name=$1 root_end=$2 pids file
  if [ -e "/run/netns/$name" ]; then
    pids=$(ip netns pids "$name" 2>/dev/null)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    nsenter --net="/run/netns/$name" -- nft delete table inet tether_loss 2>/dev/null
    ip netns del "$name" 2>/dev/null
  fi
  file=$(netns_uts_file "$name")
  if [ -e "$file" ]; then umount "$file" 2>/dev/null; rm -f "$file"; fi
  ip link del "$root_end" 2>/dev/null
  return 0
}

netns_cleanup() {  # removes everything this run created; safe to call twice
  [ -n "$NETNS_RUN_ID" ] || return 0
  local i
  for ((i = 1; i < ${#NETNS_HOSTS[@]}; i++)); do
    netns_remove_host "${NETNS_HOSTS[i]}" "${NETNS_ROOT_VETHS[i]}"
  done
  ip link del "$NETNS_BRIDGE" 2>/dev/null
  NETNS_RUN_ID="" NETNS_HOSTS=() NETNS_ROOT_VETHS=() NETNS_HOSTNAMES=() NETNS_USE_UTS=0
  return 0
}

netns_sweep_stale() {  # removes what runs killed with SIGKILL left behind
  local name pid link
  for name in $(ip netns list 2>/dev/null | awk '$1 ~ /^tether-[0-9]+-h[0-9]+$/ {print $1}'); do
    pid=${name#tether-}; pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || netns_remove_host "$name" "ttv$pid""h${name##*-h}"
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^tt[bv][0-9]+'); do
    pid=$(sed -E 's/^tt[bv]([0-9]+).*/\1/' <<<"$link")
    kill -0 "$pid" 2>/dev/null || ip link del "$link" 2>/dev/null
  done
  return 0
}
