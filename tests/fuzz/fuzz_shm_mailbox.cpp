// shm-own's receiving side on a mailbox whose shared memory holds any bytes: a real
// ShmTransport, its own mailbox mapped a second time the way a peer maps it, the
// fuzzer's bytes written into the header, ring indices and entries, then poll().
// A peer controls all of that memory; the receiver must never read or write outside
// its mailbox or past a posted receive (ASan checks), and completions must be sane. A
// message reader (as the engine's, reading messages in place) may be offered each one.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"
#include "transport/shm/shm_transport.hpp"

using namespace tether::transport;
using namespace tether::transport::shm;
using tether::fuzz::InputReader;

namespace {

constexpr std::uint32_t kRingsWritten = 3;

struct WireAddress {  // what ShmTransport::address() holds
  std::uint32_t magic;
  std::uint32_t pid;
  std::int32_t mailbox_fd;
  std::uint32_t ring_count;
};

// The transport's mailbox as a peer sees it: mapped again through /proc/self/fd.
struct PeerView {
  MailboxHeader* mailbox = nullptr;
  std::size_t bytes = 0;
  ~PeerView() {
    if (mailbox != nullptr) ::munmap(mailbox, bytes);
  }
};

bool map_as_peer(const Transport& transport, PeerView& view) {
  WireAddress wire{};
  std::memcpy(&wire, transport.address().data(), sizeof wire);
  std::string path = "/proc/self/fd/" + std::to_string(wire.mailbox_fd);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  view.bytes = mailbox_bytes(wire.ring_count);
  void* base = ::mmap(nullptr, view.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return false;
  view.mailbox = static_cast<MailboxHeader*>(base);
  return true;
}

void write_rings(PeerView& view, InputReader& input) {
  view.mailbox->ring_count = input.take<std::uint32_t>();
  view.mailbox->rings_claimed.store(input.take<std::uint32_t>());
  for (std::uint32_t index = 0; index < kRingsWritten; ++index) {
    Ring* ring = ring_at(view.mailbox, index);
    auto owner = input.take<std::uint8_t>();
    ring->owner_pid.store(owner == 0 ? 0 : owner == 1 ? static_cast<std::uint32_t>(::getpid()) : owner);
    ring->head.store(input.take<std::uint16_t>());
    ring->tail.store(input.take<std::uint16_t>());
  }
}

void write_entries(PeerView& view, InputReader& input) {
  while (!input.empty()) {
    Ring* ring = ring_at(view.mailbox, input.take<std::uint8_t>() % kRingsWritten);
    RingEntry& entry = ring->cells[input.take<std::uint16_t>() % kRingCells];
    entry.sequence.store(input.take<std::uint16_t>());
    entry.kind = static_cast<EntryKind>(input.take<std::uint8_t>() % 5);
    entry.flags = input.take<std::uint8_t>();
    entry.length = input.take<std::uint32_t>();
    entry.notification = input.take<std::uint64_t>();
    std::memset(entry.payload_start, input.take<std::uint8_t>(), sizeof entry.payload_start);
  }
}

struct PostedBuffer {
  std::unique_ptr<std::byte[]> bytes;  // exactly `length`: ASan sees any write past it
  std::size_t length = 0;
};

void check(const Completion& completion, const std::vector<PostedBuffer>& posted) {
  FUZZ_ASSERT(completion.kind == CompletionKind::receive || completion.kind == CompletionKind::remote_write);
  if (completion.kind != CompletionKind::receive) return;
  FUZZ_ASSERT(completion.context < posted.size());
  const PostedBuffer& buffer = posted[completion.context];
  FUZZ_ASSERT(completion.buffer == buffer.bytes.get() && completion.length <= buffer.length);
  FUZZ_ASSERT(completion.length <= kEntryPayloadBytes);
}

// Reads every byte it is offered (ASan: the span stays inside its ring entry) and takes
// the messages whose first byte is odd; the others go on to posted receives.
class TouchingReader final : public MessageReader {
 public:
  bool take(std::span<const std::byte> message) noexcept override {
    FUZZ_ASSERT(message.size() <= kEntryPayloadBytes);
    for (std::byte value : message) sum_ += static_cast<std::uint8_t>(value);
    return !message.empty() && (static_cast<std::uint8_t>(message[0]) & 1) != 0;
  }

 private:
  std::uint64_t sum_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static bool quiet = ::setenv("TETHER_LOG_FILE", "/dev/null", 1) == 0;  // corrupt rings are logged
  (void)quiet;
  auto transport = ShmTransport::open();
  FUZZ_ASSERT(transport.has_value());
  PeerView view;
  FUZZ_ASSERT(map_as_peer(**transport, view));
  InputReader input(data, size);
  TouchingReader reader;
  if ((input.take<std::uint8_t>() & 1) != 0) (*transport)->read_messages_in_place(&reader);
  std::vector<PostedBuffer> posted(input.take<std::uint8_t>() % 5);
  for (std::size_t index = 0; index < posted.size(); ++index) {
    posted[index].length = input.take<std::uint16_t>();
    posted[index].bytes = std::make_unique<std::byte[]>(posted[index].length);
    FUZZ_ASSERT((*transport)->post_receive(posted[index].bytes.get(), posted[index].length, nullptr, index) ==
                tether::Status::posted);
  }
  write_rings(view, input);
  write_entries(view, input);
  Completion completions[8];
  std::size_t receives = 0;
  for (int pass = 0; pass < 2 * static_cast<int>(kRingEntries); ++pass) {
    std::size_t count = (*transport)->poll(completions);
    for (std::size_t index = 0; index < count; ++index) {
      check(completions[index], posted);
      receives += completions[index].kind == CompletionKind::receive ? 1 : 0;
    }
  }
  FUZZ_ASSERT(receives <= posted.size());
  return 0;
}
