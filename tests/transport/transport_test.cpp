// Two-process tests of every transport backend, parameterised by "ofi:shm", "ofi:tcp"
// (tcp;ofi_rxm on loopback) and "verbs" (skipped without an RDMA device).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "tests/support/mapped_library.hpp"
#include "tests/transport/transport_support.hpp"
#include "tether/pool.hpp"
#include "transport/ofi/notify_injection.hpp"

namespace tether::testing {
namespace {

using transport::RemoteBuffer;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t kLargest = 64 * MiB;
const std::size_t kSizes[] = {0, 1, 8, 4 * KiB, 64 * KiB, MiB, 64 * MiB};
constexpr auto kWatchdog = std::chrono::seconds(120);

void* must_alloc(std::size_t size) {
  void* buffer = pinned_alloc(size, 4096);
  if (buffer == nullptr) ADD_FAILURE() << "pinned_alloc(" << size << "): " << pinned_last_error().message();
  return buffer;
}

std::uint64_t notification_for(std::size_t size) { return (0xabcdULL << 40) | size; }

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "verbs") return;
    auto opened = transport::open_transport("verbs");
    if (!opened) GTEST_SKIP() << opened.error().message();
  }
  void run(const Side& first, const Side& second, std::chrono::seconds watchdog = kWatchdog) {
    auto outcome = run_pair(first, second, watchdog);
    EXPECT_FALSE(outcome.timed_out) << "watchdog expired after " << watchdog.count() << " s";
    EXPECT_EQ(outcome.status[0], 0) << "first process failed (its output is above)";
    EXPECT_EQ(outcome.status[1], 0) << "second process failed (its output is above)";
  }
  [[nodiscard]] std::string spec() const { return GetParam(); }
};

// Sizes above the endpoint's max message size go as several messages.
std::size_t chunk_bytes(transport::Transport& endpoint, std::size_t size) {
  return std::max<std::size_t>(1, std::min(size, endpoint.limits().max_message_bytes));
}

TEST_P(TransportTest, SendReceiveEverySizeLandsIntact) {
  auto receiver = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kLargest);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    for (std::size_t size : kSizes) {
      std::memset(buffer, 0, size);
      std::size_t chunk = chunk_bytes(*endpoint, size), chunks = 0;
      for (std::size_t offset = 0; offset < size || chunks == 0; offset += chunk, ++chunks) {
        std::size_t length = std::min(chunk, size - offset);
        ASSERT_EQ(endpoint.post([&] { return endpoint->post_receive(static_cast<char*>(buffer) + offset, length, nullptr, size); }),
                  Status::posted);
      }
      control.send_value(size);
      std::size_t landed = 0;
      for (std::size_t i = 0; i < chunks; ++i) {
        Completion received = endpoint.wait(CompletionKind::receive);
        ASSERT_EQ(received.kind, CompletionKind::receive) << received.cause << " at size " << size;
        EXPECT_EQ(received.peer, endpoint.peer());
        EXPECT_EQ(received.context, size);
        landed += received.length;
      }
      EXPECT_EQ(landed, size);
      EXPECT_EQ(checksum(buffer, size), endpoint.receive_value(control)) << "size " << size;
    }
  };
  auto sender = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kLargest);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    for (std::size_t size : kSizes) {
      fill_pattern(buffer, size, size + 1);
      ASSERT_EQ(endpoint.receive_value(control), size);
      std::size_t chunk = chunk_bytes(*endpoint, size), posted = 0, chunks = 0;
      for (std::size_t offset = 0; offset < size || chunks == 0; offset += chunk, ++chunks) {
        std::size_t length = std::min(chunk, size - offset);
        Status status = endpoint.post([&] { return endpoint->send(endpoint.peer(), static_cast<char*>(buffer) + offset, length, nullptr, offset); });
        ASSERT_TRUE(status == Status::posted || status == Status::done) << endpoint->last_error().message();
        posted += status == Status::posted;
      }
      for (std::size_t i = 0; i < posted; ++i) {
        Completion sent = endpoint.wait(CompletionKind::send_done);
        ASSERT_EQ(sent.kind, CompletionKind::send_done) << sent.cause << " at size " << size;
      }
      control.send_value(checksum(buffer, size));
    }
  };
  run(receiver, sender);
}

TEST_P(TransportTest, WriteWithNotificationEverySizeLandsIntact) {
  auto target = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kLargest);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    auto described = endpoint->describe_pool_buffer(buffer, kLargest);
    ASSERT_TRUE(described) << described.error().message();
    control.send_bytes(transport::to_bytes(*described));
    for (std::size_t size : kSizes) {
      std::memset(buffer, 0, size);
      control.send_value(size);
      Completion written = endpoint.wait(CompletionKind::remote_write);
      ASSERT_EQ(written.kind, CompletionKind::remote_write) << written.cause << " at size " << size;
      EXPECT_EQ(written.notification, notification_for(size));
      EXPECT_EQ(written.peer, endpoint.peer());
      EXPECT_EQ(checksum(buffer, size), endpoint.receive_value(control)) << "size " << size;
    }
  };
  auto writer = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kLargest);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    auto remote = transport::remote_buffer_from_bytes(endpoint.receive_bytes(control));
    ASSERT_TRUE(remote);
    for (std::size_t size : kSizes) {
      fill_pattern(buffer, size, size + 3);
      ASSERT_EQ(endpoint.receive_value(control), size);
      Status status = endpoint.post([&] {
        return endpoint->write_with_notification(endpoint.peer(), buffer, size, nullptr, *remote, 0,
                                                 notification_for(size), size);
      });
      ASSERT_EQ(status, Status::posted) << endpoint->last_error().message();
      Completion done = endpoint.wait(CompletionKind::write_done);
      ASSERT_EQ(done.kind, CompletionKind::write_done) << done.cause << " at size " << size;
      EXPECT_EQ(done.context, size);
      control.send_value(checksum(buffer, size));
    }
  };
  run(target, writer);
}

// Where notifications travel as tagged sends, a notification receive the provider will not
// take back at once (FI_EAGAIN, injected for the first 100 re-posts) is posted again later:
// dropped, the 64 receives ran out and every later notification waited for ever.
TEST_P(TransportTest, NotificationReceivesRefusedForNowAreKept) {
  if (!spec().ends_with("+send")) GTEST_SKIP() << "notifications travel as CQ data or ring entries here";
  constexpr int kWrites = 200;
  constexpr std::size_t kBytes = 64;
  auto target = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kBytes);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    transport::ofi::inject_notification_receive_retries(0, 100);
    auto described = endpoint->describe_pool_buffer(buffer, kBytes);
    ASSERT_TRUE(described) << described.error().message();
    control.send_bytes(transport::to_bytes(*described));
    for (int k = 0; k < kWrites; ++k) {
      Completion written = endpoint.wait(CompletionKind::remote_write, 10s);
      ASSERT_EQ(written.kind, CompletionKind::remote_write) << written.cause << " at write " << k;
      EXPECT_EQ(written.notification, static_cast<std::uint64_t>(k));
    }
    transport::ofi::inject_notification_receive_retries(0, 0);
    control.send_value(checksum(buffer, kBytes));
  };
  auto writer = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kBytes);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    auto remote = transport::remote_buffer_from_bytes(endpoint.receive_bytes(control));
    ASSERT_TRUE(remote);
    for (int k = 0; k < kWrites; ++k) {
      fill_pattern(buffer, kBytes, static_cast<std::uint64_t>(k));
      Status status = endpoint.post([&] {
        return endpoint->write_with_notification(endpoint.peer(), buffer, kBytes, nullptr, *remote, 0,
                                                 static_cast<std::uint64_t>(k), 0);
      });
      ASSERT_EQ(status, Status::posted) << endpoint->last_error().message();
      Completion done = endpoint.wait(CompletionKind::write_done);
      ASSERT_EQ(done.kind, CompletionKind::write_done) << done.cause << " at write " << k;
    }
    EXPECT_EQ(endpoint.receive_value(control), checksum(buffer, kBytes)) << "the last write did not land";
  };
  run(target, writer);
}

TEST_P(TransportTest, ReadEverySizeLandsIntact) {
  auto owner = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kLargest);
    ASSERT_NE(buffer, nullptr);
    fill_pattern(buffer, kLargest, 11);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    auto described = endpoint->describe_pool_buffer(buffer, kLargest);
    ASSERT_TRUE(described) << described.error().message();
    control.send_bytes(transport::to_bytes(*described));
    for (std::size_t size : kSizes) control.send_value(checksum(buffer, size));
    (void)endpoint.receive_value(control);  // the reader is done
  };
  auto reader = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kLargest);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    auto remote = transport::remote_buffer_from_bytes(endpoint.receive_bytes(control));
    ASSERT_TRUE(remote);
    std::vector<std::uint64_t> expected;
    for (std::size_t i = 0; i < std::size(kSizes); ++i) expected.push_back(control.receive_value());
    for (std::size_t i = 0; i < std::size(kSizes); ++i) {
      std::size_t size = kSizes[i];
      std::memset(buffer, 0, size);
      Status status = endpoint.post([&] { return endpoint->read(endpoint.peer(), buffer, size, nullptr, *remote, 0, size); });
      ASSERT_EQ(status, Status::posted) << endpoint->last_error().message();
      Completion done = endpoint.wait(CompletionKind::read_done);
      ASSERT_EQ(done.kind, CompletionKind::read_done) << done.cause << " at size " << size;
      EXPECT_EQ(checksum(buffer, size), expected[i]) << "size " << size;
    }
    control.send_value(1);
  };
  run(owner, reader);
}

// Messages carry their sequence number in the first 8 bytes and a pattern after it.
// Above the inject size where the backend has a larger message size (completions follow).
std::size_t back_pressure_message_bytes(transport::Transport& endpoint) {
  const auto& limits = endpoint.limits();
  return std::min<std::size_t>(std::max<std::size_t>(limits.inject_bytes + 1, 256), limits.max_message_bytes);
}

TEST_P(TransportTest, ManyOperationsInFlightMeetBackPressureAndAllLand) {
  constexpr std::size_t kPostedReceives = 64;
  constexpr std::size_t kExtraAfterRetry = 256;
  auto receiver = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    std::size_t message = back_pressure_message_bytes(*endpoint);
    auto* buffers = static_cast<char*>(must_alloc(message * kPostedReceives));
    for (std::size_t i = 0; i < kPostedReceives; ++i)
      ASSERT_EQ(endpoint->post_receive(buffers + i * message, message, nullptr, i), Status::posted);
    std::uint64_t total = endpoint.receive_value(control);
    std::set<std::uint64_t> seen;
    std::size_t corrupt = 0;
    while (seen.size() < total) {
      Completion received = endpoint.wait(CompletionKind::receive);
      ASSERT_EQ(received.kind, CompletionKind::receive) << received.cause;
      char* landed = buffers + received.context * message;
      std::uint64_t sequence = 0;
      std::memcpy(&sequence, landed, sizeof(sequence));
      std::vector<char> expected(message - 8);
      fill_pattern(expected.data(), expected.size(), sequence);
      corrupt += received.length != message || std::memcmp(landed + 8, expected.data(), expected.size()) != 0;
      EXPECT_TRUE(seen.insert(sequence).second) << "sequence " << sequence << " twice";
      ASSERT_EQ(endpoint.post([&] { return endpoint->post_receive(landed, message, nullptr, received.context); }), Status::posted);
    }
    EXPECT_EQ(corrupt, 0u);
    EXPECT_EQ(*seen.rbegin(), total - 1);
    control.send_value(seen.size());
  };
  auto sender = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    std::size_t message = back_pressure_message_bytes(*endpoint);
    constexpr std::size_t kCap = 1 << 16;
    auto* messages = static_cast<char*>(must_alloc(message * (kCap + kExtraAfterRetry)));
    auto post_message = [&](std::uint64_t sequence) {
      char* slot = messages + sequence * message;
      std::memcpy(slot, &sequence, sizeof(sequence));
      fill_pattern(slot + 8, message - 8, sequence);
      return endpoint->send(endpoint.peer(), slot, message, nullptr, sequence);
    };
    std::uint64_t in_flight = 0;
    Status status = Status::posted;
    // A backend may finish a send at once (done: shm-own copies into the peer's ring).
    auto accepted = [](Status outcome) { return outcome == Status::posted || outcome == Status::done; };
    std::size_t posted = 0;  // sends whose completion follows
    while (in_flight < kCap && accepted(status = post_message(in_flight))) {
      posted += status == Status::posted ? 1 : 0;
      ++in_flight;
    }
    ASSERT_EQ(status, Status::retry) << "no back-pressure after " << in_flight << " sends";
    std::uint64_t total = in_flight + kExtraAfterRetry;
    control.send_value(total);
    std::size_t completed = 0;
    for (std::uint64_t sequence = in_flight; sequence < total; ++sequence) {
      status = endpoint.post([&] { return post_message(sequence); });
      ASSERT_TRUE(accepted(status)) << static_cast<int>(status);
      posted += status == Status::posted ? 1 : 0;
    }
    while (completed < posted) {
      Completion sent = endpoint.wait(CompletionKind::send_done);
      ASSERT_EQ(sent.kind, CompletionKind::send_done) << sent.cause;
      ++completed;
    }
    EXPECT_EQ(endpoint.receive_value(control), total);
  };
  run(receiver, sender);
}

TEST_P(TransportTest, WriteToInvalidKeyOrOutOfRangeIsAnErrorAndCorruptsNothing) {
  constexpr std::size_t kBytes = 64 * KiB;
  auto target = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kBytes);
    ASSERT_NE(buffer, nullptr);
    fill_pattern(buffer, kBytes, 5);
    std::uint64_t before = checksum(buffer, kBytes);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    auto described = endpoint->describe_pool_buffer(buffer, kBytes);
    ASSERT_TRUE(described);
    RemoteBuffer wrong_key = *described;
    wrong_key.key += 0x5a5a17;
    control.send_bytes(transport::to_bytes(wrong_key));
    control.send_bytes(transport::to_bytes(*described));
    (void)endpoint.receive_value(control);  // the writer is done
    EXPECT_EQ(checksum(buffer, kBytes), before);
  };
  auto writer = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kBytes);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    fill_pattern(buffer, kBytes, 6);
    auto wrong_key = transport::remote_buffer_from_bytes(endpoint.receive_bytes(control));
    auto right = transport::remote_buffer_from_bytes(endpoint.receive_bytes(control));
    ASSERT_TRUE(wrong_key && right);
    Status status = endpoint.post([&] { return endpoint->write_with_notification(endpoint.peer(), buffer, 4 * KiB, nullptr, *wrong_key, 0, 1, 1); });
    if (status == Status::posted) {
      // libfabric 1.17 shm drops an RMA command with a bad key at the target without a
      // response, so the write never completes: the caller's timeout is the error there
      // (2 s; the other providers answer within milliseconds).
      Completion outcome = endpoint.wait(CompletionKind::write_done, spec() == "ofi:shm" ? 2s : 10s);
      EXPECT_EQ(outcome.kind, CompletionKind::error) << "a write to an invalid key completed";
      if (spec() != "ofi:shm") {
        EXPECT_NE(outcome.error, Errc::timeout) << "no error completion for an invalid key";
        EXPECT_EQ(outcome.peer, endpoint.peer());
      }
      std::printf("invalid key: %s (%s, provider errno %d)\n", std::string(errc_name(outcome.error)).c_str(),
                  outcome.cause, outcome.provider_errno);
    } else {
      EXPECT_EQ(status, Status::error);
      std::printf("invalid key refused at post: %s\n", endpoint->last_error().message().c_str());
    }
    Status out_of_range = endpoint->write(endpoint.peer(), buffer, 200, nullptr, *right, kBytes - 100, 2);
    EXPECT_EQ(out_of_range, Status::error);
    EXPECT_EQ(endpoint->last_error().code, Errc::invalid_argument) << endpoint->last_error().message();
    control.send_value(1);
  };
  run(target, writer);
}

TEST_P(TransportTest, PeerExitingMidStreamGivesErrorOrTimeoutNeverHangs) {
  auto leaver = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    void* buffer = must_alloc(64 * KiB);
    ASSERT_EQ(endpoint->post_receive(buffer, 64 * KiB, nullptr, 0), Status::posted);
    Completion received = endpoint.wait(CompletionKind::receive);
    ASSERT_EQ(received.kind, CompletionKind::receive) << received.cause << " " << errc_name(received.error);
    std::fflush(stdout);
    ::_exit(0);  // gone without closing anything, as a crashed process
  };
  auto survivor = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    const std::size_t bytes = std::min<std::size_t>(64 * KiB, endpoint->limits().max_message_bytes);
    void* buffer = must_alloc(bytes);
    fill_pattern(buffer, bytes, 9);
    ASSERT_NE(endpoint.post([&] { return endpoint->send(endpoint.peer(), buffer, bytes, nullptr, 0); }), Status::error);
    ASSERT_TRUE(endpoint.wait_peer_exit(control, 20s)) << "the other process did not exit";
    Completion outcome;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    for (int i = 1; outcome.error == Errc::ok && std::chrono::steady_clock::now() < deadline; ++i) {
      Status status = endpoint.post([&] { return endpoint->send(endpoint.peer(), buffer, bytes, nullptr, i); }, 5s);
      if (status == Status::error) {
        outcome.error = endpoint->last_error().code;
        std::printf("peer gone, send refused: %s\n", endpoint->last_error().message().c_str());
        break;
      }
      if (status == Status::retry) outcome.error = Errc::timeout;
      if (status != Status::posted) continue;
      outcome = endpoint.wait(CompletionKind::send_done, 3s);
      if (outcome.error != Errc::ok)
        std::printf("peer gone after %d sends: %s (%s)\n", i, std::string(errc_name(outcome.error)).c_str(), outcome.cause);
    }
    EXPECT_NE(outcome.error, Errc::ok) << "every send to an exited peer completed";
  };
  run(leaver, survivor, std::chrono::seconds(90));
}

TEST_P(TransportTest, PoolArenasRegisterWithADomainOpenedAfterThePool) {
  constexpr std::size_t kBytes = MiB;
  auto target = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kBytes);  // the pool exists before the domain
    ASSERT_NE(buffer, nullptr);
    PoolStats before = pool_stats();
    ASSERT_GT(before.arenas, 0u);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok());
    PoolStats after = pool_stats();
    EXPECT_EQ(after.registrations - before.registrations, after.arenas);
    std::memset(buffer, 0, kBytes);
    auto described = endpoint->describe_pool_buffer(buffer, kBytes);
    ASSERT_TRUE(described) << described.error().message();
    control.send_bytes(transport::to_bytes(*described));
    Completion written = endpoint.wait(CompletionKind::remote_write);
    ASSERT_EQ(written.kind, CompletionKind::remote_write) << written.cause;
    EXPECT_EQ(checksum(buffer, kBytes), endpoint.receive_value(control));
    endpoint->detach_pool();
    EXPECT_EQ(pool_stats().deregistrations - after.deregistrations, after.arenas);
  };
  auto writer = [&](const ControlChannel& control) {
    void* buffer = must_alloc(kBytes);
    ConnectedEndpoint endpoint(spec(), control);
    ASSERT_TRUE(endpoint.ok() && buffer);
    fill_pattern(buffer, kBytes, 21);
    auto remote = transport::remote_buffer_from_bytes(endpoint.receive_bytes(control));
    ASSERT_TRUE(remote);
    ASSERT_EQ(endpoint.post([&] { return endpoint->write_with_notification(endpoint.peer(), buffer, kBytes, nullptr, *remote, 0, 77, 0); }),
              Status::posted);
    ASSERT_EQ(endpoint.wait(CompletionKind::write_done).kind, CompletionKind::write_done);
    control.send_value(checksum(buffer, kBytes));
  };
  run(target, writer);
}

TEST(TransportOpenTest, UnknownTransportAndBadPeerAddressAreClearErrors) {
  auto unknown = transport::open_transport("carrier-pigeon");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Errc::invalid_argument);
  auto missing = transport::open_transport("ofi:no-such-provider");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().cause.find("no-such-provider"), std::string::npos) << missing.error().message();
}

bool libfabric_mapped() { return library_mapped("libfabric.so"); }

// libfabric is loaded when an ofi transport opens, not with libtether (its libinfinipath
// costs every process that loads it 0.1-0.2 s at start). In a child: a clean process.
TEST(TransportOpenTest, LibfabricIsLoadedOnlyWhenAnOfiTransportOpens) {
  // ctest runs each test alone (--gtest_filter names it): there libfabric must be absent.
  bool alone = ::testing::GTEST_FLAG(filter) == "TransportOpenTest.LibfabricIsLoadedOnlyWhenAnOfiTransportOpens";
  if (!alone && libfabric_mapped()) GTEST_SKIP() << "an earlier test in this process opened an ofi transport";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);  // the watchdog: SIGALRM ends a child that hangs
    if (libfabric_mapped()) ::_exit(2);
    auto own = transport::open_transport("shm-own");
    if (!own || libfabric_mapped()) ::_exit(3);
    auto ofi = transport::open_transport("ofi:tcp");
    if (!ofi) std::fprintf(stderr, "ofi:tcp: %s\n", ofi.error().message().c_str());
    ::_exit(!ofi ? 4 : libfabric_mapped() ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << WTERMSIG(status);
  const char* failures[] = {"", "", "libfabric was mapped before any transport opened", "opening shm-own loaded libfabric",
                            "ofi:tcp did not open", "ofi:tcp opened without libfabric mapped"};
  EXPECT_EQ(WEXITSTATUS(status), 0) << failures[std::min(WEXITSTATUS(status), 5)];
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportTest, ::testing::Values("shm-own", "tcp-own", "ofi:shm", "ofi:tcp", "ofi:tcp+send", "verbs"),
                         [](const ::testing::TestParamInfo<std::string>& parameter) {
                           std::string name = parameter.param;
                           std::replace(name.begin(), name.end(), ':', '_');
                           std::replace(name.begin(), name.end(), '-', '_');
                           std::replace(name.begin(), name.end(), '+', '_');
                           return name;
                         });

}  // namespace
}  // namespace tether::testing
