# shellcheck shell=bash
# Sourced by the bench scripts that run fi_pingpong beside tether. on_bench_cpu N CMD...
# runs CMD bound to the N-th (0 or 1) of the first two CPUs this shell may use, as
# tether-run binds a job of 2 ranks and tether-bench-transport its two processes, so the
# baselines run placed alike; unbound where the shell has one CPU.
bench_cpus=()
read_bench_cpus() {
  local list part parts
  list=$(taskset -cp $$ 2>/dev/null) || return 0
  IFS=, read -ra parts <<<"${list##*: }"
  for part in "${parts[@]}"; do
    ((${#bench_cpus[@]} >= 2)) && break
    bench_cpus+=("${part%-*}")
    [[ $part == *-* ]] && ((${part%-*} < ${part#*-})) && bench_cpus+=("$((${part%-*} + 1))")
  done
  return 0
}
read_bench_cpus
on_bench_cpu() {  # N CMD...
  local cpu=${bench_cpus[$1]:-}
  shift
  if ((${#bench_cpus[@]} >= 2)); then taskset -c "$cpu" "$@"; else "$@"; fi
}
