// shm-own only: a ring whose entry was corrupted in shared memory is reported and
// ignored from then on, never followed, and the receiver keeps working.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "tests/transport/transport_support.hpp"
#include "transport/shm/mailbox.hpp"

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
      next = &ring->entries[head % transport::shm::kRingEntries];
      next->kind = transport::shm::EntryKind::message;
      next->length = 5;
      std::memcpy(next->payload, "evil", 5);
      next->sequence.store(head + 100000, std::memory_order_release);
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

}  // namespace
}  // namespace tether::testing
