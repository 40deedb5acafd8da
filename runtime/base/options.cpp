// The configuration table. Add a row here for every new TETHER_* knob.
#include "runtime/base/config.hpp"

namespace tether::config {
namespace {

constexpr Option kOptions[] = {
    // Logging and statistics
    {"TETHER_LOG_LEVEL", "warn", Kind::choice,
     "Messages at this level and above are printed", "error|warn|info|debug|trace"},
    {"TETHER_LOG_FILE", "stderr", Kind::text,
     "Where log lines go: stderr, stdout, or a path (%h host, %p pid expand)"},
    {"TETHER_STATS", "off", Kind::choice,
     "Dump the counters: at exit, on SIGUSR2, or never", "off|exit|signal"},

    // Pinned pool
    {"TETHER_POOL_SIZE", "auto", Kind::size,
     "Bytes mapped and pinned at start-up (auto: 32M, or half of RLIMIT_MEMLOCK if lower)"},
    {"TETHER_POOL_MAX", "auto", Kind::size,
     "Most bytes the pool may pin in all (auto: 4G, or RLIMIT_MEMLOCK if lower)"},
    {"TETHER_POOL_ARENA_SIZE", "8M", Kind::size,
     "Bytes per arena; the pool grows by whole arenas (multiple of 2M)"},
    {"TETHER_POOL_BACKING", "auto", Kind::choice,
     "Arena memory: memfd (shareable with on-node peers), anon (private, THP), hugetlb, "
     "or auto (hugetlb when free huge pages exist, else memfd)",
     "auto|memfd|anon|hugetlb"},
    {"TETHER_POOL_THREAD_CACHE", "1M", Kind::size,
     "Most bytes of free buffers one thread keeps for itself before returning them"},

    // Registration cache for user memory (pool/rcache)

    // Transports (transport/)
    {"TETHER_OFI_PROVIDER", "auto", Kind::text,
     "libfabric provider (shm, tcp, tcp;ofi_rxm, verbs;ofi_rxm, efa, cxi); auto: the first of "
     "verbs;ofi_rxm, efa, cxi found, else tcp;ofi_rxm"},
    {"TETHER_OFI_DOMAIN", "auto", Kind::text,
     "libfabric domain (NIC or interface, e.g. lo, eth0, mlx5_0); auto: the provider's first"},
    {"TETHER_VERBS_DEVICE", "auto", Kind::text,
     "RDMA device for the verbs transport (see ibv_devices); auto: the first one"},

    // Bootstrap, launch and messaging (runtime/, launch/)

};

}  // namespace

std::span<const Option> table() { return kOptions; }

}  // namespace tether::config
