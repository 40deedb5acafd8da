// shm-own only: a ring whose entry was corrupted in shared memory is reported and
// ignored from then on, never followed, and the receiver keeps working; payload that
// looks like a later entry's sequence is never taken for one; offer_message_from hands
// the reader one peer's next message and leaves what the reader declines to poll().
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tests/transport/transport_support.hpp"
#include "transport/shm/mailbox.hpp"
#include "transport/shm/shm_transport.hpp"

namespace tether::testing {
namespace {

using transport::shm::MailboxHeader;
using transport::shm::mailbox_bytes;
using transport::shm::ring_at;

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

// A buffer mapped from a file the process still has open gets a file key (the peer maps the
// file) only where the mapping is shared: a private one is copy-on-write, so the peer would
// write the file on disk and miss this process's own changes. It, and a range running past
// its mapping, go by CMA (key 0).
TEST(ShmOwnRegistrar, OnlySharedFileMappingsGetAFileKey) {
  char path[] = "/tmp/tether-shm-key.XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  constexpr std::size_t kBytes = 2 * 4096;
  ASSERT_EQ(::ftruncate(fd, kBytes), 0);
  transport::shm::ShmRegistrar registrar;
  void* shared = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void* copied = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ASSERT_NE(shared, MAP_FAILED);
  ASSERT_NE(copied, MAP_FAILED);
  std::memset(copied, 'B', kBytes);  // this process's copy differs from the file
  auto shared_key = registrar.register_range(shared, kBytes, Access::all);
  auto copied_key = registrar.register_range(copied, kBytes, Access::all);
  auto past_the_end = registrar.register_range(shared, 2 * kBytes, Access::all);
  ASSERT_TRUE(shared_key && copied_key && past_the_end);
  EXPECT_NE(shared_key->remote_key, 0u) << "a shared file mapping should be mapped by the peer";
  EXPECT_EQ(copied_key->remote_key, 0u) << "a private mapping was given the file's key";
  EXPECT_EQ(past_the_end->remote_key, 0u) << "a range past its mapping was given the file's key";
  ::munmap(shared, kBytes);
  ::munmap(copied, kBytes);
  ::close(fd);
}

}  // namespace
}  // namespace tether::testing
