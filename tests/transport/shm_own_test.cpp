// shm-own only: a ring whose entry was corrupted in shared memory is reported and
// ignored from then on, never followed, and the receiver keeps working; payload that
// looks like a later entry's sequence is never taken for one; offer_message_from hands
// the reader one peer's next message and leaves what the reader declines to poll().
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tests/transport/transport_support.hpp"
#include "tether/pool.hpp"
#include "transport/shm/mailbox.hpp"
#include "transport/shm/shm_transport.hpp"

namespace tether::testing {
namespace {

using transport::shm::MailboxHeader;
using transport::shm::mailbox_bytes;
using transport::shm::ring_at;
using namespace std::chrono_literals;

// Maps the mailbox an shm-own address names (pid at byte 4, fd at byte 8).
MailboxHeader* map_mailbox(std::span<const std::byte> address) {
  std::uint32_t pid = 0;
  std::int32_t fd = -1;
  std::memcpy(&pid, address.data() + 4, sizeof pid);
  std::memcpy(&fd, address.data() + 8, sizeof fd);
  int local = ::open(fmt::format("/proc/{}/fd/{}", pid, fd).c_str(), O_RDWR);
  if (local < 0) return nullptr;
  MailboxHeader header{};
  if (::pread(local, &header, sizeof(std::uint32_t) * 4, 0) <= 0) return nullptr;
  void* mapped = ::mmap(nullptr, mailbox_bytes(header.ring_count), PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  ::close(local);
  return mapped == MAP_FAILED ? nullptr : static_cast<MailboxHeader*>(mapped);
}

// Takes messages in place while `accept` is set, and keeps what it took.
class KeepingReader final : public transport::MessageReader {
 public:
  bool accept = true;
  std::vector<std::string> taken;
  [[nodiscard]] bool take(std::span<const std::byte> message) noexcept override {
    if (!accept) return false;
    taken.emplace_back(reinterpret_cast<const char*>(message.data()), message.size());
    return true;
  }
};

TEST(ShmOwnTest, OfferingOnePeersNextMessageTakesExactlyThatOrLeavesItForPoll) {
  auto receiver = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    KeepingReader reader;
    endpoint->read_messages_in_place(&reader);
    EXPECT_FALSE(endpoint->offer_message_from(endpoint.peer())) << "an offer before the peer sent anything";
    control.send_value(1);         // send two messages
    (void)control.receive_value();  // sent (not the endpoint's read: it would poll them away)
    EXPECT_FALSE(endpoint->offer_message_from(endpoint.peer() + 7)) << "an offer from a peer never inserted";
    ASSERT_TRUE(endpoint->offer_message_from(endpoint.peer()));
    ASSERT_TRUE(endpoint->offer_message_from(endpoint.peer()));
    EXPECT_FALSE(endpoint->offer_message_from(endpoint.peer())) << "a third message nobody sent";
    EXPECT_EQ(reader.taken, (std::vector<std::string>{std::string("first", 6), std::string("second", 7)}));
    reader.accept = false;
    char buffer[64] = {};
    ASSERT_EQ(endpoint->post_receive(buffer, sizeof buffer, nullptr, 5), Status::posted);
    control.send_value(2);         // send one more
    (void)control.receive_value();  // sent
    EXPECT_FALSE(endpoint->offer_message_from(endpoint.peer())) << "the reader declined it";
    Completion left = endpoint.wait(CompletionKind::receive);
    ASSERT_EQ(left.kind, CompletionKind::receive) << "the declined message did not stay for poll()";
    EXPECT_EQ(left.context, 5U);
    EXPECT_STREQ(buffer, "third");
    endpoint->read_messages_in_place(nullptr);
  };
  auto sender = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    auto send = [&](const char* text) {
      ASSERT_EQ(endpoint.post([&] { return endpoint->send(endpoint.peer(), text, std::strlen(text) + 1, nullptr, 0); }),
                Status::done);
    };
    (void)endpoint.receive_value(control);
    send("first");
    send("second");
    control.send_value(1);
    (void)endpoint.receive_value(control);
    send("third");
    control.send_value(2);
  };
  auto outcome = run_pair(receiver, sender, std::chrono::seconds(60));
  expect_both_passed(outcome);
}

TEST(ShmOwnTest, CorruptedRingEntryIsReportedAndNeverFollowed) {
  auto victim = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    char buffers[4][64] = {};
    for (int i = 0; i < 4; ++i) ASSERT_EQ(endpoint->post_receive(buffers[i], 64, nullptr, i), Status::posted);
    control.send_bytes(endpoint->address());
    Completion first = endpoint.wait(CompletionKind::receive);
    ASSERT_EQ(first.kind, CompletionKind::receive);
    EXPECT_STREQ(buffers[first.context], "before");
    control.send_value(1);                 // now the vandal corrupts its ring
    (void)endpoint.receive_value(control); // done
    Completion after = endpoint.wait(CompletionKind::receive, 300ms);
    EXPECT_EQ(after.error, Errc::timeout) << "an entry of the corrupted ring was followed";
    control.send_value(2);                 // now the vandal gives the entry its proper sequence
    (void)endpoint.receive_value(control); // done
    Completion repaired = endpoint.wait(CompletionKind::receive, 300ms);
    EXPECT_EQ(repaired.error, Errc::timeout) << "the ring was followed again after it was found corrupted";
    control.send_value(3);
  };
  auto vandal = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    auto address = endpoint.receive_bytes(control);
    ASSERT_NE(endpoint.post([&] { return endpoint->send(endpoint.peer(), "before", 7, nullptr, 0); }), Status::error);
    (void)endpoint.receive_value(control);
    MailboxHeader* mailbox = map_mailbox(address);
    ASSERT_NE(mailbox, nullptr);
    transport::shm::RingEntry* next = nullptr;
    std::uint64_t head = 0;
    for (std::uint32_t i = 0; i < mailbox->ring_count; ++i) {
      auto* ring = ring_at(mailbox, i);
      if (ring->owner_pid.load() != static_cast<std::uint32_t>(::getpid())) continue;
      // The entry the victim reads next: a well-formed message under a sequence no lap gives.
      head = ring->head.load();
      next = &ring->cells[head % transport::shm::kRingCells];
      next->kind = transport::shm::EntryKind::message;
      next->length = 5;
      std::memcpy(transport::shm::payload_of(*next), "evil", 5);
      next->sequence.store(head + 1 + 16 * transport::shm::kRingCells, std::memory_order_release);  // a later lap's
    }
    ASSERT_NE(next, nullptr) << "the vandal owns no ring in the victim's mailbox";
    control.send_value(1);
    (void)endpoint.receive_value(control);
    next->sequence.store(head + 1, std::memory_order_release);  // a ready entry, were the ring still followed
    control.send_value(2);
    (void)endpoint.receive_value(control);
  };
  auto outcome = run_pair(victim, vandal, std::chrono::seconds(60));
  expect_both_passed(outcome);
}

TEST(ShmOwnTest, MailboxOfAnotherLayoutVersionIsRefusedWithBothVersionsNamed) {
  auto receiver = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    MailboxHeader* mailbox = map_mailbox(endpoint->address());
    ASSERT_NE(mailbox, nullptr);
    mailbox->version = transport::shm::kMailboxVersion + 1;  // as a build with another layout made it
    control.send_value(1);
    (void)endpoint.receive_value(control);
  };
  auto sender = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    (void)endpoint.receive_value(control);
    EXPECT_EQ(endpoint.post([&] { return endpoint->send(endpoint.peer(), "hello", 6, nullptr, 0); }), Status::error);
    const Error& error = endpoint->last_error();
    EXPECT_EQ(error.code, Errc::invalid_argument);
    EXPECT_NE(error.cause.find(fmt::format("layout version {}", transport::shm::kMailboxVersion + 1)), std::string::npos)
        << error.cause;
    EXPECT_NE(error.cause.find(fmt::format("writes version {}", transport::shm::kMailboxVersion)), std::string::npos)
        << error.cause;
    control.send_value(1);
  };
  auto outcome = run_pair(receiver, sender, std::chrono::seconds(60));
  expect_both_passed(outcome);
}

// message_flags: a word at a cell start of the payload that a later sequence of that cell
// could equal flags the entry, whether the payload covers the word whole or in part (the
// rest is what the cell held).
TEST(ShmMailbox, PayloadWordsThatLookLikeALaterSequenceFlagTheirEntry) {
  using namespace transport::shm;
  constexpr std::uint64_t kPosition = 1000;
  constexpr std::size_t kSecondCell = kCellBytes - kEntryHeaderBytes;  // payload offset of cell 1's word
  constexpr std::size_t kThirdCell = kSecondCell + kCellBytes;         // and of cell 2's
  std::vector<RingEntry> cells(3);
  std::vector<std::byte> source(kThirdCell + sizeof(std::uint64_t));
  // The payload of `length` bytes (the words given at cells 1 and 2) copied over what cell
  // 2's word held before, then flagged.
  auto flags_of = [&](std::size_t length, std::uint64_t second_word, std::uint64_t third_word, std::uint64_t held) {
    std::memcpy(source.data() + kSecondCell, &second_word, sizeof second_word);
    std::memcpy(source.data() + kThirdCell, &third_word, sizeof third_word);
    cells[2].sequence.store(held);
    std::memcpy(payload_of(cells[0]), source.data(), length);
    return message_flags(source.data(), length, cells[0], kPosition);
  };
  const std::uint64_t later_second = kPosition + 1 + 1 + 5 * std::uint64_t{kRingCells};
  const std::uint64_t later_third = kPosition + 2 + 1 + 3 * std::uint64_t{kRingCells};
  constexpr std::size_t kWhole = kThirdCell + sizeof(std::uint64_t);
  EXPECT_EQ(flags_of(kWhole, 0, 0, 0), 0);
  EXPECT_EQ(flags_of(kWhole, later_second, 0, 0), kEntryClearCells);
  EXPECT_EQ(flags_of(kWhole, later_second + 1, 0, 0), 0);
  EXPECT_EQ(flags_of(kWhole, 0, later_third, 0), kEntryClearCells);
  // One payload byte in cell 2's word: the 7 bytes the cell held decide.
  EXPECT_EQ(flags_of(kThirdCell + 1, 0, later_third, later_third), kEntryClearCells);
  EXPECT_EQ(flags_of(kThirdCell + 1, 0, later_third, 0), 0);
  EXPECT_EQ(flags_of(kThirdCell + 1, 0, later_third + 1, later_third), 0);
}

// The ring position of the next entry of `cells` in `ring` (a big one: never taken back
// to cell 0 early), after the padding that would precede it.
std::uint64_t next_entry_position(const transport::shm::Ring& ring, std::uint32_t cells) {
  using transport::shm::kRingCells;
  std::uint64_t tail = ring.tail.load();
  auto index = static_cast<std::uint32_t>(tail % kRingCells);
  return index + cells > kRingCells ? tail + (kRingCells - index) : tail;
}

// A payload whose word at every cell start equals a sequence a later lap's entry starting
// in that cell could carry (mailbox.hpp): the ring must not take it for one once the cell
// is polled again after the ring wrapped. Two laps of the largest messages so crafted,
// then small messages that walk through those cells with the receiver polling each one
// before it is written: every message must arrive intact and the ring stay followed.
TEST(ShmOwnTest, PayloadThatLooksLikeALaterSequenceIsNeverTakenForOne) {
  using transport::shm::kRingCells;
  constexpr std::size_t kLarge = transport::shm::kEntryPayloadBytes;
  constexpr std::uint32_t kLargeCells = transport::shm::cells_for(kLarge);
  constexpr int kLargeMessages = 2 * static_cast<int>(transport::shm::kRingEntries) + 1;
  constexpr int kSmallMessages = 2 * static_cast<int>(transport::shm::kRingWarmCells) + 8;
  constexpr int kMessages = 1 + kLargeMessages + kSmallMessages;  // the first claims the ring
  auto receiver = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    control.send_bytes(endpoint->address());
    std::vector<std::byte> buffer(kLarge);
    int damaged = 0;
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_EQ(endpoint->post_receive(buffer.data(), buffer.size(), nullptr, static_cast<std::uint64_t>(i)),
                Status::posted);
      Completion landed = endpoint.wait(CompletionKind::receive, 10s);
      ASSERT_EQ(landed.error, Errc::ok) << "message " << i << " of " << kMessages << " never came";
      std::uint64_t sent = endpoint.receive_value(control);
      damaged += checksum(buffer.data(), landed.length) != sent || landed.context != static_cast<std::uint64_t>(i);
      for (int poll = 0; poll < 4; ++poll) endpoint.poll_into_backlog();  // the next cell, before it is written
      control.send_value(static_cast<std::uint64_t>(i));
    }
    EXPECT_EQ(damaged, 0) << damaged << " of " << kMessages << " messages differ from what was sent";
    EXPECT_TRUE(endpoint.backlog().empty()) << "a completion nobody sent";
  };
  auto sender = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("shm-own", control);
    ASSERT_TRUE(endpoint.ok());
    auto address = endpoint.receive_bytes(control);
    std::vector<std::byte> payload(kLarge);
    auto send = [&](std::size_t bytes) {
      ASSERT_EQ(endpoint.post([&] { return endpoint->send(endpoint.peer(), payload.data(), bytes, nullptr, 0); }),
                Status::done);
      control.send_value(checksum(payload.data(), bytes));
      (void)endpoint.receive_value(control);  // taken, and the next cell polled
    };
    fill_pattern(payload.data(), 8, 0);
    send(8);
    MailboxHeader* mailbox = map_mailbox(address);
    ASSERT_NE(mailbox, nullptr);
    transport::shm::Ring* ring = nullptr;
    for (std::uint32_t i = 0; i < mailbox->ring_count && ring == nullptr; ++i)
      if (ring_at(mailbox, i)->owner_pid.load() == static_cast<std::uint32_t>(::getpid())) ring = ring_at(mailbox, i);
    ASSERT_NE(ring, nullptr) << "the sender owns no ring in the receiver's mailbox";
    for (int i = 0; i < kLargeMessages; ++i) {
      fill_pattern(payload.data(), kLarge, static_cast<std::uint64_t>(i));
      std::uint64_t position = next_entry_position(*ring, kLargeCells);
      for (std::uint32_t cell = 1; cell < kLargeCells; ++cell) {
        std::uint64_t later_sequence = position + cell + 1 + kRingCells;  // this cell's, one lap on
        std::size_t offset = cell * transport::shm::kCellBytes - transport::shm::kEntryHeaderBytes;
        std::memcpy(payload.data() + offset, &later_sequence, std::min(sizeof later_sequence, kLarge - offset));
      }
      send(kLarge);
    }
    for (int i = 0; i < kSmallMessages; ++i) {
      fill_pattern(payload.data(), 8, static_cast<std::uint64_t>(kLargeMessages + i));
      send(8);
    }
  };
  auto outcome = run_pair(receiver, sender, std::chrono::seconds(120));
  expect_both_passed(outcome);
}

// A file of `bytes` in /tmp (unlinked), mapped shared; the descriptor stays open.
struct SharedFile {
  int fd = -1;
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  explicit SharedFile(std::size_t size) : bytes(size) {
    char path[] = "/tmp/tether-shm-key.XXXXXX";
    fd = ::mkstemp(path);
    if (fd < 0) return;
    ::unlink(path);
    void* mapped = ::ftruncate(fd, static_cast<off_t>(size)) == 0
                       ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (mapped != MAP_FAILED) base = static_cast<std::byte*>(mapped);
  }
  ~SharedFile() {
    if (base != nullptr) ::munmap(base, bytes);
    if (fd >= 0) ::close(fd);
  }
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;
};

// Only the pool's arenas get a file key (the peer maps the memfd, cached by its fd number):
// they are never closed. Any other file's descriptor may be closed and its number reused
// for another file, so a shared file mapping goes by CMA (key 0), as do private ones.
TEST(ShmOwnRegistrar, OnlyThePoolsArenasGetAFileKey) {
  constexpr std::size_t kBytes = 2 * 4096;
  SharedFile file(kBytes);
  ASSERT_NE(file.base, nullptr);
  transport::shm::ShmRegistrar registrar;
  void* pooled = pinned_alloc(kBytes, 4096);
  ASSERT_NE(pooled, nullptr) << pinned_last_error().message();
  auto file_key = registrar.register_range(file.base, kBytes, Access::all);
  auto pool_key = registrar.register_range(pooled, kBytes, Access::all);
  auto past_the_arena = registrar.register_range(pooled, std::size_t{1} << 40, Access::all);
  ASSERT_TRUE(file_key && pool_key && past_the_arena);
  EXPECT_EQ(file_key->remote_key, 0u) << "a file whose descriptor may be reused was given a file key";
  EXPECT_NE(pool_key->remote_key, 0u) << "pool memory should be mapped by the peer";
  EXPECT_EQ(past_the_arena->remote_key, 0u) << "a range running past its arena was given the arena's key";
  pinned_free(pooled);
}

// A descriptor closed and reused for another file: an RMA into the second file lands in
// it. Both once got keys naming the same fd number, and the peer's mapping of the first
// file, cached by that number, took the second write.
TEST(ShmOwnTest, AWriteIntoAFileWhoseDescriptorNumberWasReusedLandsInThatFile) {
  auto writer = transport::open_transport("shm-own");
  auto owner = transport::open_transport("shm-own");
  ASSERT_TRUE(writer && owner);
  auto peer = (*writer)->insert_peer((*owner)->address());
  ASSERT_TRUE(peer);
  constexpr std::size_t kBytes = 4096;
  auto write_into = [&](const SharedFile& file, char fill) {
    std::vector<char> data(kBytes, fill);
    auto registration = (*owner)->registrar().register_range(file.base, kBytes, Access::all);
    ASSERT_TRUE(registration);
    auto address = reinterpret_cast<std::uint64_t>(file.base);
    transport::RemoteBuffer target{address, registration->remote_key, address, kBytes};
    Status status = (*writer)->write(*peer, data.data(), kBytes, nullptr, target, 0, 7);
    ASSERT_NE(status, Status::error) << (*writer)->last_error().message();
    Completion completions[4];
    for (auto deadline = std::chrono::steady_clock::now() + 10s; status == Status::posted;) {
      for (std::size_t i = 0, n = (*writer)->poll(completions); i < n; ++i) {
        ASSERT_EQ(completions[i].kind, CompletionKind::write_done) << completions[i].cause;
        status = Status::done;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the write never completed";
    }
    EXPECT_EQ(std::count(file.base, file.base + kBytes, std::byte(fill)), static_cast<long>(kBytes))
        << "the write did not land in the file registered";
  };
  int first_fd = -1;
  {
    SharedFile first(kBytes);
    ASSERT_NE(first.base, nullptr);
    first_fd = first.fd;
    ASSERT_NO_FATAL_FAILURE(write_into(first, 'A'));
  }
  SharedFile second(kBytes);
  ASSERT_NE(second.base, nullptr);
  ASSERT_EQ(second.fd, first_fd) << "the test needs the descriptor number reused";
  ASSERT_NO_FATAL_FAILURE(write_into(second, 'B'));
}

}  // namespace
}  // namespace tether::testing
