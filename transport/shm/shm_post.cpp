// Posting: messages and write notifications go into this process's ring in the peer's
// mailbox; RMA is a memcpy into (or out of) the peer's mapped memfd, or CMA for memory
// with no memfd. Local completions are queued for poll().
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "transport/shm/peer_copy.hpp"
#include "transport/shm/shm_transport.hpp"

namespace tether::transport::shm {
namespace {

Expected<PeerMapping> map_peer_file(std::uint32_t pid, std::int32_t fd) {
  std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  int local = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat status {};
  if (local < 0 || ::fstat(local, &status) != 0) {
    int error = errno;
    if (local >= 0) ::close(local);
    return make_error(Errc::peer_unreachable, fmt::format("cannot open {}: {}", path, std::strerror(error)),
                      "the peer must be alive and run as the same user (or set TETHER_SHM=ofi)", error);
  }
  auto bytes = static_cast<std::size_t>(status.st_size);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  ::close(local);
  if (base == MAP_FAILED)
    return make_error(Errc::out_of_memory, fmt::format("mmap of {} ({} bytes): {}", path, bytes, std::strerror(errno)),
                      "raise the address-space limit (ulimit -v)", errno);
  return PeerMapping{static_cast<std::byte*>(base), bytes};
}

}  // namespace

bool ShmTransport::report_unknown_peer(PeerIndex peer) noexcept {
  (void)fail(Errc::invalid_argument, fmt::format("peer {} was never inserted ({} peers)", peer, peers_.size()),
             "insert the peer's address with insert_peer first");
  return false;
}

// Maps the peer's mailbox and claims a ring in it, once.
Status ShmTransport::attach(ShmPeer& peer) noexcept {
  if (peer.writer.ring != nullptr) return Status::done;
  auto mapping = map_peer_file(peer.pid, peer.mailbox_fd);
  if (!mapping) return fail(mapping.error().code, mapping.error().cause, mapping.error().remedy, mapping.error().sys_errno);
  auto* mailbox = reinterpret_cast<MailboxHeader*>(mapping->base);
  // Read once: the peer owns the header and may change it after this check.
  std::uint32_t ring_count = mapping->bytes < sizeof(MailboxHeader) ? 0 : std::atomic_ref(mailbox->ring_count).load();
  if (ring_count == 0 || mailbox->magic != kMailboxMagic || mapping->bytes < mailbox_bytes(ring_count)) {
    ::munmap(mapping->base, mapping->bytes);
    return fail(Errc::invalid_argument, fmt::format("process {} has no valid tether mailbox", peer.pid),
                "run the same tether version on every rank");
  }
  if (std::uint32_t version = std::atomic_ref(mailbox->version).load(); version != kMailboxVersion) {
    ::munmap(mapping->base, mapping->bytes);
    return fail(Errc::invalid_argument,
                fmt::format("process {}'s shm-own mailbox has layout version {}; this process writes version {}",
                            peer.pid, version, kMailboxVersion),
                "run the same tether build on every rank of a node");
  }
  Ring* ring = claim_ring(mailbox, ring_count, static_cast<std::uint32_t>(::getpid()));
  if (ring == nullptr) {
    ::munmap(mapping->base, mapping->bytes);
    return fail(Errc::limit_exceeded, fmt::format("all {} rings of process {}'s mailbox are taken", ring_count, peer.pid),
                "run fewer ranks per node, or set TETHER_SHM=ofi");
  }
  peer.mailbox = mailbox;
  peer.mailbox_bytes = mapping->bytes;
  peer.writer = RingWriter{.ring = ring,
                           .tail = ring->tail.load(std::memory_order_acquire),
                           .cached_head = ring->head.load(std::memory_order_acquire)};
  return Status::done;
}

// A free entry of this process's ring in the peer's mailbox, or nullptr with `status`
// saying why (retry: the ring is full).
RingEntry* ShmTransport::reserve(ShmPeer& peer, std::size_t payload_bytes, Status& status) noexcept {
  status = Status::done;
  RingEntry* entry = peer.writer.ring != nullptr ? peer.writer.reserve(payload_bytes) : nullptr;
  return entry != nullptr ? entry : attach_and_reserve(peer, payload_bytes, status);
}

// The first entry for this peer (its mailbox is mapped then), or one that finds the ring full.
RingEntry* ShmTransport::attach_and_reserve(ShmPeer& peer, std::size_t payload_bytes, Status& status) noexcept {
  status = attach(peer);
  if (status != Status::done) return nullptr;
  RingEntry* entry = peer.writer.reserve(payload_bytes);
  status = entry == nullptr ? Status::retry : Status::done;
  if (entry == nullptr && ::kill(static_cast<pid_t>(peer.pid), 0) != 0 && errno == ESRCH)
    status = fail(Errc::peer_unreachable, fmt::format("process {} exited with its ring full", peer.pid),
                  "stop sending to that peer");
  return entry;
}

void ShmTransport::complete_locally(CompletionKind kind, PeerIndex peer, std::uint64_t context, const void* buffer,
                                    std::size_t length) {
  Completion completion;
  completion.kind = kind;
  completion.peer = peer;
  completion.context = context;
  completion.buffer = const_cast<void*>(buffer);
  completion.length = length;
  local_completions_.push_back(completion);
}

Status ShmTransport::post_receive(void* buffer, std::size_t length, void*, std::uint64_t context) noexcept {
  try {
    receives_.push_back({buffer, length, context});
  } catch (...) {
    return Status::retry;
  }
  return Status::posted;
}

Status ShmTransport::send(PeerIndex peer, const void* buffer, std::size_t length, void*, std::uint64_t) noexcept {
  if (!check_peer(peer)) return Status::error;
  if (length > kEntryPayloadBytes)
    return fail(Errc::invalid_argument, fmt::format("a {}-byte message over shm-own (at most {})", length, kEntryPayloadBytes),
                "split it, or send larger data by RMA");
  Status status = Status::done;
  RingEntry* entry = reserve(peers_[peer], length, status);
  if (entry == nullptr) return status;
  entry->kind = EntryKind::message;
  entry->length = static_cast<std::uint32_t>(length);
  if (length > 0) std::memcpy(payload_of(*entry), buffer, length);
  entry->flags = message_flags(static_cast<const std::byte*>(buffer), length, *entry, peers_[peer].writer.tail);
  peers_[peer].writer.publish(*entry);
  return Status::done;  // the bytes are in the peer's ring: the buffer may be reused
}

std::byte* ShmTransport::peer_bytes(ShmPeer& peer, const RemoteBuffer& remote, std::size_t offset,
                                    std::size_t length) noexcept {
  auto fd = static_cast<std::int32_t>(remote.key >> 32);
  auto found = peer.files.find(fd);
  if (found == peer.files.end()) {
    auto mapping = map_peer_file(peer.pid, fd);
    if (!mapping) return (void)fail(mapping.error().code, mapping.error().cause, mapping.error().remedy), nullptr;
    found = peer.files.emplace(fd, *mapping).first;
  }
  std::uint64_t file_offset = (remote.key & 0xffffffffU) * kPageBytes + (remote.address - remote.registration_base) + offset;
  if (remote.address < remote.registration_base || file_offset > found->second.bytes ||
      length > found->second.bytes - file_offset) {
    (void)fail(Errc::invalid_argument,
               fmt::format("RMA of {} bytes at file offset {} runs outside the peer's {}-byte arena", length, file_offset,
                           found->second.bytes),
               "keep RMA inside the RemoteBuffer the peer described");
    return nullptr;
  }
  return found->second.base + file_offset;
}

std::byte* ShmTransport::map_remote(PeerIndex peer, const RemoteBuffer& remote, std::size_t length) noexcept {
  if (peer >= peers_.size() || remote.key == 0) return nullptr;
  if (remote.length != 0 && length > remote.length) return nullptr;
  return peer_bytes(peers_[peer], remote, 0, length);
}

// Moves `length` bytes between `local` and the peer's `remote` buffer at `offset`: a
// memcpy through the mapped memfd, or one CMA call for memory with no memfd.
Status ShmTransport::copy_with_peer(ShmPeer& peer, void* local, std::size_t length, const RemoteBuffer& remote,
                                    std::size_t offset, Direction direction) noexcept {
  if (remote.length != 0 && (offset > remote.length || length > remote.length - offset))
    return fail(Errc::invalid_argument,
                fmt::format("RMA of {} bytes at offset {} runs past the {}-byte remote buffer", length, offset, remote.length),
                "keep RMA inside the RemoteBuffer the peer described");
  if (length == 0) return Status::done;
  bool to_peer = direction == Direction::to_peer;
  if (remote.key != 0) {
    std::byte* mapped = peer_bytes(peer, remote, offset, length);
    if (mapped == nullptr) return Status::error;
    if (to_peer) copy_to_peer(mapped, local, length, streaming_from_);
    else std::memcpy(local, mapped, length);
    return Status::done;
  }
  iovec here{local, length};
  iovec there{reinterpret_cast<void*>(remote.address + offset), length};
  auto pid = static_cast<pid_t>(peer.pid);
  ssize_t moved = to_peer ? ::process_vm_writev(pid, &here, 1, &there, 1, 0) : ::process_vm_readv(pid, &here, 1, &there, 1, 0);
  if (moved == static_cast<ssize_t>(length)) return Status::done;
  return fail(Errc::transport,
              fmt::format("{} of {} bytes with process {}: {}", to_peer ? "process_vm_writev" : "process_vm_readv", length,
                          peer.pid, moved < 0 ? std::strerror(errno) : "partial"),
              "allow ptrace between the ranks (kernel.yama.ptrace_scope=0) or use pool memory", errno);
}

Status ShmTransport::write(PeerIndex peer, const void* buffer, std::size_t length, void*, const RemoteBuffer& target,
                           std::size_t target_offset, std::uint64_t context) noexcept {
  if (!check_peer(peer)) return Status::error;
  Status status = copy_with_peer(peers_[peer], const_cast<void*>(buffer), length, target, target_offset, Direction::to_peer);
  if (status != Status::done) return status;
  complete_locally(CompletionKind::write_done, peer, context, buffer, length);
  return Status::posted;
}

// The notification's entry is reserved before the copy, so a full ring is a retry with
// nothing written.
Status ShmTransport::write_with_notification(PeerIndex peer, const void* buffer, std::size_t length, void*,
                                             const RemoteBuffer& target, std::size_t target_offset,
                                             std::uint64_t notification, std::uint64_t context) noexcept {
  if (!check_peer(peer)) return Status::error;
  Status status = Status::done;
  RingEntry* entry = reserve(peers_[peer], 0, status);
  if (entry == nullptr) return status;
  status = copy_with_peer(peers_[peer], const_cast<void*>(buffer), length, target, target_offset, Direction::to_peer);
  if (status != Status::done) return status;
  entry->kind = EntryKind::remote_write;
  entry->flags = 0;
  entry->length = static_cast<std::uint32_t>(length);
  entry->notification = notification;
  peers_[peer].writer.publish(*entry);
  complete_locally(CompletionKind::write_done, peer, context, buffer, length);
  return Status::posted;
}

Status ShmTransport::read(PeerIndex peer, void* buffer, std::size_t length, void*, const RemoteBuffer& source,
                          std::size_t source_offset, std::uint64_t context) noexcept {
  if (!check_peer(peer)) return Status::error;
  Status status = copy_with_peer(peers_[peer], buffer, length, source, source_offset, Direction::from_peer);
  if (status != Status::done) return status;
  complete_locally(CompletionKind::read_done, peer, context, buffer, length);
  return Status::posted;
}

}  // namespace tether::transport::shm
