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
     "Print every component's counters at exit (exit) or not (off)", "off|exit"},

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
    {"TETHER_RCACHE_MAX_COUNT", "auto", Kind::size,
     "Most entries registered at once (a count; auto: vm.max_map_count / 4)"},
    {"TETHER_RCACHE_MAX_BYTES", "auto", Kind::size,
     "Most bytes registered at once (auto: a quarter of RAM, or RLIMIT_MEMLOCK if lower)"},
    {"TETHER_RCACHE_CHUNK", "2M", Kind::size,
     "Registrations never cross a multiple of this; larger sends are registered chunk by chunk"},
    {"TETHER_RCACHE_LEAVE_PINNED", "on", Kind::boolean,
     "Keep released entries registered until a limit needs room (off: deregister at last release)"},
    {"TETHER_RCACHE_OVER_LIMIT", "uncached", Kind::choice,
     "Past a limit with every entry in use: register without caching, or fail the request",
     "uncached|fail"},
    {"TETHER_RCACHE_MONITOR", "auto", Kind::choice,
     "What reports unmapped memory: userfaultfd events plus interposed unmapping calls (auto, "
     "uffd), interposition only, or nothing (none: only with TETHER_MALLOC_KEEP=on)",
     "auto|uffd|interpose|none"},
    {"TETHER_MALLOC_KEEP", "off", Kind::boolean,
     "Tell glibc never to return heap memory (no trim, no mmapped blocks): cached registrations "
     "of malloc'd buffers never go stale; the process keeps its peak heap"},

    // Transports (transport/)
    {"TETHER_OFI_PROVIDER", "auto", Kind::text,
     "libfabric provider (shm, tcp, tcp;ofi_rxm, verbs;ofi_rxm, efa, cxi); auto: the first of "
     "verbs;ofi_rxm, efa, cxi found, else tcp;ofi_rxm"},
    {"TETHER_OFI_DOMAIN", "auto", Kind::text,
     "libfabric domain (NIC or interface, e.g. lo, eth0, mlx5_0); auto: the provider's first"},
    {"TETHER_OFI_NOTIFY", "auto", Kind::choice,
     "How an RMA write's 64-bit notification reaches the target: cq-data (remote CQ data), send (a "
     "message once the write has landed) or auto (cq-data when the provider carries 8 bytes)", "auto|cq-data|send"},
    {"TETHER_VERBS_DEVICE", "auto", Kind::text,
     "RDMA device for the verbs transport (see ibv_devices); auto: the first one"},
    {"TETHER_REMOTE_KEYS", "auto", Kind::choice,
     "Keys peers get for pool memory they write or read (rendezvous buffers, channel slots and words): exact (a "
     "registration of just that range, made per transfer or channel, where the transport checks keys), arena "
     "(the key of the whole pool arena: no registration, but the peer may reach the rest of the arena), or auto "
     "(exact on software providers such as tcp and shm, where it pins nothing; arena on verbs and hardware "
     "providers, where a registration costs microseconds)",
     "auto|exact|arena"},

    // Bootstrap, launch and messaging (runtime/, launch/)
    {"TETHER_BOOTSTRAP_TIMEOUT", "5m", Kind::duration,
     "Longest wait for a PMIx fence or a peer's published data (0s: no limit)"},
    {"TETHER_BOOTSTRAP_PREEXCHANGE", "0", Kind::boolean,
     "Exchange every rank's published data in one fence at start-up instead of on first use"},
    {"TETHER_RUN_TMPDIR", "/tmp", Kind::text,
     "Where tether-run creates its private (mode 0700) directory for the PMIx server"},
    {"TETHER_EAGER_LIMIT", "8K", Kind::size,
     "Messages up to this size are copied through pinned bounce buffers; larger ones use rendezvous"},
    {"TETHER_EAGER_BUFFERS", "64", Kind::integer,
     "Pinned receive buffers posted per endpoint for eager and control messages"},
    {"TETHER_MAX_REQUESTS", "65536", Kind::integer, "Sends and receives that may be in flight at once"},
    {"TETHER_EAGER_CREDITS", "64", Kind::integer,
     "Eager messages a rank may have unreceived at one peer; past it messages wait at the sender "
     "(rendezvous), which bounds the unexpected queue at credits x eager limit per peer"},
    {"TETHER_RNDV_PROTOCOL", "auto", Kind::choice,
     "Rendezvous: put (receiver sends CTS, sender writes), get (receiver reads) or split (the sender writes the "
     "first half while the receiver reads the rest: two cores copy); auto is split where the transport maps the "
     "peer's memory (shm-own), else put",
     "auto|put|get|split"},
    {"TETHER_INJECT_MEMLOCK_FAILURE", "0", Kind::boolean,
     "Fault injection, for tests: registering user memory (buffers outside the pool) for a rendezvous fails as "
     "if the locked-memory limit were reached; the peer's send is refused with the same error"},
    {"TETHER_INJECT_WRITE_FAILURE", "0", Kind::integer,
     "Fault injection, for tests: this rank's N-th rendezvous write fails as a transport error would; the send "
     "fails and its receive learns which writes landed (0: never)"},
    {"TETHER_INJECT_CHANNEL_WRITE_FAILURE", "0", Kind::integer,
     "Fault injection, for tests: this rank's N-th persistent-channel data write or message (not shm-own's direct "
     "stores) fails as a transport error would; the channel fails and tells its peer's side (0: never)"},
    {"TETHER_INJECT_WRITE_FAILURE_AT", "post", Kind::choice,
     "Fault injection, for tests: where the write TETHER_INJECT_WRITE_FAILURE or TETHER_INJECT_CHANNEL_WRITE_FAILURE "
     "names, or the credit TETHER_INJECT_CREDIT_FAILURE names, fails: its post (the send, start() or credit fails), "
     "or its completion (it never reaches the peer, and the error comes back at the next progress pass); "
     "after-close: a channel write's error comes back only once close() gave up waiting for it "
     "(TETHER_CHANNEL_CLOSE_TIMEOUT), credits fail at their completion and rendezvous writes at their post",
     "post|completion|after-close"},
    {"TETHER_INJECT_CREDIT_FAILURE", "0", Kind::integer,
     "Fault injection, for tests: this rank's N-th persistent-channel credit message or write (not shm-own's "
     "direct stores) fails (where: TETHER_INJECT_WRITE_FAILURE_AT); the receive channel fails and tells its sender, "
     "or, a credit message failing at its completion, owes the credits again (0: never)"},
    {"TETHER_INJECT_CORRUPT_FLAG", "0", Kind::integer,
     "Fault injection, for tests: this rank's N-th shm-own direct store into a persistent channel writes a flag "
     "line naming a slot past the channel's last; the receive side refuses it, fails and tells its sender (0: never)"},
    {"TETHER_INJECT_CORRUPT_CREDIT", "0", Kind::integer,
     "Fault injection, for tests: from this rank's N-th shm-own credit-word store on, each counts 2^20 more "
     "messages released than it took; the sender refuses the word, fails and tells the receiver (0: never)"},
    {"TETHER_RNDV_CHUNK", "2M", Kind::size, "Rendezvous transfers move in RMA operations of at most this size"},
    {"TETHER_PROGRESS_THREAD", "off", Kind::boolean, "Run a thread that drives progress continuously"},
    {"TETHER_YIELD", "auto", Kind::choice,
     "Waiting calls yield the CPU on every poll (on), or spin and sleep a moment after each 1 ms spun without "
     "result (off); auto: on when this node's ranks outnumber the CPUs a rank may use", "auto|on|off"},
    {"TETHER_PEER_TIMEOUT", "30s", Kind::duration,
     "A rank that a pending send or receive waits on, and from which nothing came for this long (not even "
     "the answer to a probe, which it gives whenever it calls into the runtime), is unreachable: requests "
     "with it fail with peer_unreachable naming it (0s: never)"},
    {"TETHER_SHM", "on", Kind::boolean,
     "Use the shared-memory path for peers on this node (off: the network transport for all)"},
    {"TETHER_SHM_TRANSPORT", "own", Kind::choice,
     "The shared-memory path: own (tether's mailboxes and mapped arenas) or ofi (libfabric's shm)", "own|ofi"},
    {"TETHER_SHM_STREAMING_COPY", "off", Kind::text,
     "shm-own RMA writes and direct channel stores of at least this many bytes copy with non-temporal stores: "
     "they skip reading each destination line first, but leave the bytes in memory, not in cache, so a "
     "receiver that reads them soon waits longer (see docs/persist.md for figures); off, on (half of this "
     "CPU's L2, where the source and the destination no longer both fit in it), or a size"},
    {"TETHER_NET_TRANSPORT", "auto", Kind::choice,
     "The network path (peers on other nodes, or every peer with TETHER_SHM=off): own (tether's TCP sockets) "
     "or ofi (libfabric, TETHER_OFI_PROVIDER); auto: ofi when TETHER_OFI_PROVIDER names a provider or libfabric "
     "lists an RDMA one (verbs, efa, cxi), else own (auto loads libfabric to look where /sys/class/infiniband, "
     "cxi_user or cxi lists a device; own never does)", "auto|own|ofi"},
    {"TETHER_TCP_INTERFACE", "auto", Kind::text,
     "Where tether's own TCP transport listens: an interface name (eth0) or IPv4 address; auto: the first "
     "interface that is up and not loopback, else lo"},
    {"TETHER_TCP_CONNECT_TIMEOUT", "10s", Kind::duration,
     "How long tcp-own waits for a connection to a peer to open (the pair's first frame) before everything "
     "sent to it fails with peer_unreachable; the rank goes on polling meanwhile (0s: as long as the kernel "
     "retries, about two minutes)"},
    {"TETHER_TCP_SOCKET_BUFFER", "1M", Kind::size,
     "Send and receive buffer of each tcp-own socket (SO_SNDBUF, SO_RCVBUF; the kernel doubles it, capped at "
     "net.core.wmem_max and rmem_max); a 1 MiB message then leaves in one sendmsg while the peer copies it out "
     "(0: the kernel's autotuning)"},
    {"TETHER_TCP_CONGESTION", "auto", Kind::text,
     "TCP congestion control of each tcp-own connection: auto (reno to a peer on this host, where BBR's "
     "pacing only slows the kernel's copies; the system's algorithm to other hosts), system (the system's "
     "everywhere), or an algorithm's name for every connection (/proc/sys/net/ipv4/"
     "tcp_available_congestion_control lists them)"},
    {"TETHER_NODE_NAME", "auto", Kind::text,
     "This rank's node as the hybrid transport compares it (ranks with equal names use shared memory, "
     "others the network); auto: host name, boot id and network and pid namespaces"},

    // Persistent channels (persist/)
    {"TETHER_CHANNEL_CONNECT_TIMEOUT", "2m", Kind::duration,
     "Time after a channel's creation, or a wait_connected() call, by which the peer must create the "
     "matching channel: later, waits for it fail with a timeout (0s: no limit)"},
    {"TETHER_CHANNEL_CREDIT_BATCH", "0", Kind::integer,
     "Released slots returned to the sender at once, by a credit write or message (0: a quarter of the slots, at "
     "least 1; more than half where credits travel as messages)"},
    {"TETHER_CHANNEL_INLINE_MAX", "8K", Kind::size,
     "Channel messages up to this size travel as one send instead of an RMA write where sends arrive "
     "sooner (tcp, libfabric shm; not verbs or the direct on-node path); capped by the engine's receive "
     "buffers (TETHER_EAGER_LIMIT) and by the peer's own limit; 0: always RMA writes"},
    {"TETHER_CHANNEL_SPLIT_COPY", "256K", Kind::size,
     "Direct on-node channel messages (shm-own) of at least this many bytes (and over 64 KiB) are split copies: the "
     "sender and a receiver waiting for the message each copy 64 KiB pieces of it at once, so two cores move it "
     "(docs/persist.md); the send completes (test, wait, next_buffer) once the receiver's pieces are copied; 0: the "
     "sender copies alone"},
    {"TETHER_CHANNEL_CLOSE_TIMEOUT", "2s", Kind::duration,
     "Longest a closing send channel waits for its writes in flight before it reports them and closes (their "
     "buffers stay registered until they end, and one that fails is told to the receiver), a closing channel "
     "not yet connected for its handshake, so that its peer is told it closed, and a closing receive channel on "
     "the user's memory for the sender's acknowledgement that no write will land there any more"},

};

}  // namespace

std::span<const Option> table() { return kOptions; }

}  // namespace tether::config
