// Opening: the mailbox memfd, the address peers need, peers' insertion, and the registrar
// that names memory by the memfd behind it.
#include "transport/shm/shm_transport.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string_view>

#include "runtime/base/log.hpp"
#include "transport/shm/peer_copy.hpp"

namespace tether::transport::shm {
namespace {

constexpr std::uint32_t kRingCount = 64;  // local senders one process can hear from

struct WireAddress {
  std::uint32_t magic;
  std::uint32_t pid;
  std::int32_t mailbox_fd;
  std::uint32_t ring_count;
};

struct Backing {
  int fd = -1;
  std::uint64_t file_offset = 0;
};

// Whether [address, address + length) lies in one of the pool's arenas (a shared mapping of
// a memfd named tether-arena, per /proc/self/maps); `start` and `end` name the mapping
// holding `address`. Arenas are never closed, so a peer's mapping of one, cached by fd
// number, never turns into another file. Any other file's descriptor may be closed and its
// number reused for a different file, and a private mapping is copy-on-write: such memory
// goes by CMA, which follows the address.
bool in_pool_arena(const void* address, std::size_t length, ino_t& inode, dev_t& device, std::uint64_t& file_offset,
                   std::uintptr_t& start_out, std::uintptr_t& end_out) {
  constexpr std::string_view kArenaPath = "/memfd:tether-arena";
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  auto wanted = reinterpret_cast<std::uintptr_t>(address);
  char line[512];
  bool found = false;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long start = 0, end = 0, offset = 0, inode_number = 0;
    unsigned major_number = 0, minor_number = 0;
    char permissions[5] = {};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &start, &end, permissions, &offset, &major_number,
                    &minor_number, &inode_number, &path_at) != 7)
      continue;
    if (wanted < start || wanted >= end) continue;
    start_out = start;
    end_out = end;
    found = permissions[3] == 's' && std::string_view(line + path_at).starts_with(kArenaPath) &&
            length <= end - wanted;
    inode = static_cast<ino_t>(inode_number);
    device = makedev(major_number, minor_number);
    file_offset = offset + (wanted - start);
    break;
  }
  std::fclose(maps);
  return found;
}

// An open descriptor of this process for that file, or -1.
int descriptor_of(ino_t inode, dev_t device) {
  DIR* directory = ::opendir("/proc/self/fd");
  if (directory == nullptr) return -1;
  int found = -1;
  while (dirent* entry = ::readdir(directory)) {
    int fd = std::atoi(entry->d_name);
    struct stat status {};
    if (entry->d_name[0] == '.' || fd == ::dirfd(directory) || ::fstat(fd, &status) != 0) continue;
    if (status.st_ino == inode && status.st_dev == device && S_ISREG(status.st_mode)) {
      found = fd;
      break;
    }
  }
  ::closedir(directory);
  return found;
}

// Mappings found to be no pool arena: later ranges inside them skip the scan of
// /proc/self/maps (a stale entry only means CMA, which works for any memory).
class RangesOutsideArenas {
 public:
  bool contains(std::uintptr_t address) {
    std::lock_guard lock(mutex_);
    auto next = ranges_.upper_bound(address);
    return next != ranges_.begin() && address < std::prev(next)->second;
  }
  void add(std::uintptr_t start, std::uintptr_t end) {
    std::lock_guard lock(mutex_);
    if (ranges_.size() >= kMostRanges) ranges_.clear();
    ranges_[start] = end;
  }

 private:
  static constexpr std::size_t kMostRanges = 4096;
  std::mutex mutex_;
  std::map<std::uintptr_t, std::uintptr_t> ranges_;
};

RangesOutsideArenas g_outside_arenas;

Backing find_backing(const void* address, std::size_t length) {
  Backing backing;
  auto wanted = reinterpret_cast<std::uintptr_t>(address);
  if (g_outside_arenas.contains(wanted)) return backing;
  ino_t inode = 0;
  dev_t device = 0;
  std::uintptr_t start = 0, end = 0;
  if (in_pool_arena(address, length, inode, device, backing.file_offset, start, end))
    backing.fd = descriptor_of(inode, device);
  else if (end > start && length <= end - wanted)  // a range past an arena's end may still start in one
    g_outside_arenas.add(start, end);
  return backing;
}

}  // namespace

Expected<Registration> ShmRegistrar::register_range(void* address, std::size_t length, Access) {
  Registration registration;
  registration.address = address;
  registration.length = length;
  Backing backing = find_backing(address, length);
  if (backing.fd >= 0 && backing.file_offset % kPageBytes == 0)
    registration.remote_key = (static_cast<std::uint64_t>(backing.fd) << 32) | (backing.file_offset / kPageBytes);
  return registration;
}

Expected<std::unique_ptr<Transport>> ShmTransport::open() {
  std::unique_ptr<ShmTransport> transport(new ShmTransport());
  const auto& streaming_from = streaming_copy_setting();
  if (!streaming_from) return tl::unexpected(streaming_from.error());
  transport->streaming_from_ = *streaming_from;
  if (auto created = transport->create_mailbox(kRingCount); !created) return tl::unexpected(created.error());
  Limits& limits = transport->limits_;
  limits.max_message_bytes = kEntryPayloadBytes;
  limits.max_rma_bytes = 0;  // no limit
  limits.inject_bytes = kEntryPayloadBytes;
  limits.send_queue_depth = kRingEntries;
  limits.receive_queue_depth = kRingEntries;
  log::info("transport", "opened shm-own: mailbox of {} rings x {} cells of {} B, messages up to {} B (fd {})",
            kRingCount, kRingCells, kCellBytes, kEntryPayloadBytes, transport->mailbox_fd_);
  return std::unique_ptr<Transport>(std::move(transport));
}

Expected<void> ShmTransport::create_mailbox(std::uint32_t ring_count) {
  mailbox_bytes_ = mailbox_bytes(ring_count);
  mailbox_fd_ = ::memfd_create("tether-mailbox", MFD_CLOEXEC);
  if (mailbox_fd_ < 0 || ::ftruncate(mailbox_fd_, static_cast<off_t>(mailbox_bytes_)) != 0)
    return make_error(Errc::unsupported, fmt::format("memfd for the shared-memory mailbox: {}", std::strerror(errno)),
                      "run on Linux >= 3.17, or set TETHER_SHM=ofi to use libfabric's shm", errno);
  void* mapped = ::mmap(nullptr, mailbox_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, mailbox_fd_, 0);
  if (mapped == MAP_FAILED)
    return make_error(Errc::out_of_memory, fmt::format("mmap of the {}-byte mailbox: {}", mailbox_bytes_, std::strerror(errno)),
                      "raise the address-space limit (ulimit -v)", errno);
  mailbox_ = new (mapped) MailboxHeader{kMailboxMagic, kMailboxVersion, ring_count, static_cast<std::uint32_t>(::getpid()), {}};
  ring_peers_.assign(ring_count, kUnknownPeer);
  ring_broken_.assign(ring_count, 0);
  WireAddress wire{kMailboxMagic, static_cast<std::uint32_t>(::getpid()), mailbox_fd_, ring_count};
  address_.resize(sizeof wire);
  std::memcpy(address_.data(), &wire, sizeof wire);
  return {};
}

ShmTransport::~ShmTransport() {
  detach_pool();
  for (ShmPeer& peer : peers_) {
    if (peer.mailbox != nullptr) ::munmap(peer.mailbox, peer.mailbox_bytes);
    for (auto& [fd, mapping] : peer.files) ::munmap(mapping.base, mapping.bytes);
  }
  if (mailbox_ != nullptr) ::munmap(mailbox_, mailbox_bytes_);
  if (mailbox_fd_ >= 0) ::close(mailbox_fd_);
}

Expected<PeerIndex> ShmTransport::insert_peer(std::span<const std::byte> address) {
  WireAddress wire{};
  if (address.size() != sizeof wire)
    return make_error(Errc::invalid_argument, fmt::format("a {}-byte shm-own address (expected {})", address.size(), sizeof wire),
                      "every rank of a job must use the same transport (TETHER_SHM)");
  std::memcpy(&wire, address.data(), sizeof wire);
  if (wire.magic != kMailboxMagic || wire.pid == 0 || wire.mailbox_fd < 0)
    return make_error(Errc::invalid_argument, "a malformed shm-own address", "run the same tether on every rank");
  ShmPeer peer;
  peer.pid = wire.pid;
  peer.mailbox_fd = wire.mailbox_fd;
  peers_.push_back(std::move(peer));
  std::fill(ring_peers_.begin(), ring_peers_.end(), kUnknownPeer);  // resolve again with the new peer
  peer_rings_.clear();
  return static_cast<PeerIndex>(peers_.size() - 1);
}

}  // namespace tether::transport::shm
