// tether-hostile-check: a 2-rank job where rank 1 is a hostile peer. Over the job's
// real transport it sends rank 0 malformed and random wire messages and channel
// notifications naming unknown channels, slots out of range, lengths past the slot and
// credits never earned. Rank 0 must drop and log each one (tests/hostile/hostile_test.cpp
// reads the log), count the channel rejections, and afterwards still exchange messages
// and channel data with rank 1, checksums verified. Last, a rendezvous get with a
// made-up key must fail the matching receive.
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "persist/channel_state.hpp"
#include "runtime/messaging/engine.hpp"
#include "tests/hostile/hostile_wire.hpp"
#include "tests/support/rank_check.hpp"
#include "tests/support/start_job.hpp"
#include "tether/persist.hpp"
#include "tether/pool.hpp"
#include "tether/runtime.hpp"

namespace {

using tether::ReceiveChannel;
using tether::Request;
using tether::Runtime;
using tether::SendChannel;
using tether::Status;
namespace persist = tether::persist;

constexpr int kReceiver = 0;
constexpr int kHostile = 1;
constexpr int kBaitTag = 1;
constexpr int kDoneTag = 2;
constexpr int kBogusGetTag = 77;
constexpr std::uint64_t kBogusGetBytes = 65536;
constexpr int kRandomMessages = 200;
constexpr int kRandomNotifications = 20;
// Channel ids on rank 0: its receive channel is created first (id 1), its send channel second.
constexpr std::uint32_t kReceiveChannelId = 1;
constexpr std::uint32_t kSendChannelId = 2;
constexpr tether::ChannelShape kShape{.peer = 0, .tag = 5, .slot_bytes = 256, .slots = 4, .partitions = 1};

struct Channels {
  SendChannel out;
  ReceiveChannel in;
};

tether::ChannelShape shape_for(int peer, int tag) {
  tether::ChannelShape shape = kShape;
  shape.peer = peer;
  shape.tag = tag;
  return shape;
}

// Rank 0 receives on tag 5 and sends on tag 6; rank 1 the other way round.
Channels connect_channels(Runtime& runtime) {
  int peer = 1 - runtime.rank();
  int in_tag = runtime.rank() == kReceiver ? 5 : 6;
  auto in = ReceiveChannel::create(runtime, shape_for(peer, in_tag));
  auto out = SendChannel::create(runtime, shape_for(peer, 11 - in_tag));
  if (!in || !out) {
    fmt::print(stderr, "channel creation: {}\n", !in ? in.error().message() : out.error().message());
    std::exit(1);
  }
  SendChannel* sends[] = {&*out};
  ReceiveChannel* receives[] = {&*in};
  auto connected = tether::wait_connected(sends, receives);
  CHECK(connected.has_value(), "{}", connected ? "" : connected.error().message());
  return {std::move(*out), std::move(*in)};
}

void fill(std::span<std::byte> out, std::uint64_t seed) {
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (std::byte& b : out) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<std::byte>(state >> 56);
  }
}

bool filled_with(std::span<const std::byte> in, std::uint64_t seed) {
  std::vector<std::byte> expected(in.size());
  fill(expected, seed);
  return std::memcmp(in.data(), expected.data(), in.size()) == 0;
}

Status wait_for(Runtime& runtime, void* buffer, std::size_t bytes, int peer, int tag, bool send,
                tether::MessageInfo* info = nullptr) {
  Request request;
  Status started = send ? runtime.isend(buffer, bytes, peer, tag, request) : runtime.irecv(buffer, bytes, peer, tag, request);
  if (started == Status::error) return started;
  return runtime.wait(request, info);
}

// --- the hostile rank ------------------------------------------------------------------

void send_raw(Runtime& runtime, const std::vector<tether::hostile::RawMessage>& messages) {
  auto& engine = runtime.engine();
  std::lock_guard lock(engine.progress_mutex());
  for (const auto& message : messages) engine.post_raw(kReceiver, message.bytes, message.take_sequence);
}

std::vector<std::uint64_t> hostile_notifications() {
  using persist::encode;
  std::vector<std::uint64_t> all = {
      encode({4000, 0, 8}),                                  // no channel has that id
      encode({kReceiveChannelId, 99, 8}),                    // slot beyond the channel's slots
      encode({kReceiveChannelId, 0, 100000}),                // length beyond the slot
      encode({kSendChannelId, persist::kCreditSlot, 1000}),  // more credits than messages in flight
      encode({kReceiveChannelId, persist::kCreditSlot, 1}),  // a credit for a receive channel
      encode({kSendChannelId, 0, 8}),                        // data for a send channel
  };
  std::mt19937_64 random(8);
  for (int index = 0; index < kRandomNotifications; ++index) {
    auto id = static_cast<std::uint32_t>(16 + random() % (persist::kMaxChannelId - 16));
    all.push_back(encode({id, static_cast<std::uint32_t>(random()), static_cast<std::uint32_t>(random())}));
  }
  return all;
}

// Channel messages (small messages and credits as sends) that pass the wire checks but
// not the registry's: each is rejected and counted like a notification.
std::vector<tether::hostile::RawMessage> hostile_channel_messages() {
  using tether::messaging::ChannelCarry;
  using tether::messaging::MessageKind;
  auto message = [](int source, ChannelCarry carry, std::size_t payload_bytes) {
    auto header = tether::messaging::make_header(MessageKind::channel, source, 5, 0, payload_bytes);
    std::vector<std::byte> bytes(tether::messaging::kChannelHeaderBytes + payload_bytes, std::byte{0x5a});
    std::memcpy(bytes.data(), &header, sizeof header);
    std::memcpy(bytes.data() + sizeof header, &carry, sizeof carry);
    return tether::hostile::RawMessage{"channel message", std::move(bytes), false, ""};
  };
  using persist::encode;
  return {
      message(kHostile, {encode({4000, 0, 8}), 0}, 8),                      // no channel has that id
      message(kHostile, {encode({kReceiveChannelId, 0, 8}), 0}, 4),         // length is not the notification's
      message(kHostile, {0, encode({kSendChannelId, 0, 1})}, 0),            // a credit word that names a slot
      message(kHostile, {encode({kReceiveChannelId, persist::kCreditSlot, 1}), 0}, 0),  // data in the credit slot
      message(kReceiver, {encode({kReceiveChannelId, 0, 8}), 0}, 8),        // another rank than the channel's peer
      message(kHostile, {0, encode({kReceiveChannelId, persist::kFailureSlot, 0})}, 0),  // a failure without a code
      message(kHostile, {0, encode({kReceiveChannelId, persist::kFailureSlot, 999})}, 0),  // an unknown code
      message(kHostile, {0, encode({kReceiveChannelId, persist::kClosedSlot, 5000})}, 0),  // a close beyond the slots
  };
}

// One 8-byte write into the bait buffer carrying `notification`; retried on back-pressure.
void write_notification(Runtime& runtime, const tether::transport::RemoteBuffer& bait, std::byte* source,
                        std::uint64_t notification) {
  auto& engine = runtime.engine();
  // A channel context with id 0: this rank's registry ignores the completion.
  std::uint64_t context = tether::messaging::make_context(tether::messaging::ContextKind::channel, 0);
  for (;;) {
    Status status = Status::error;
    {
      std::lock_guard lock(engine.progress_mutex());
      auto peer = engine.peer_index(kReceiver);
      if (peer) status = engine.transport().write_with_notification(*peer, source, 8, nullptr, bait, 0, notification, context);
    }
    if (status != Status::retry) {
      CHECK(status != Status::error, "write with notification: {}", engine.transport().last_error().message());
      return;
    }
    runtime.progress();
  }
}

void act_hostile(Runtime& runtime) {
  std::byte bait_bytes[32];
  CHECK(wait_for(runtime, bait_bytes, sizeof bait_bytes, kReceiver, kBaitTag, false) == Status::done, "bait");
  auto bait = tether::transport::remote_buffer_from_bytes(bait_bytes);
  CHECK(bait.has_value(), "bait description");
  send_raw(runtime, tether::hostile::malformed_messages(kHostile, kReceiver, runtime.size()));
  send_raw(runtime, tether::hostile::random_messages(kHostile, kRandomMessages, 7));
  auto* source = static_cast<std::byte*>(tether::pinned_alloc(64, 64));
  for (std::uint64_t notification : hostile_notifications()) write_notification(runtime, *bait, source, notification);
  send_raw(runtime, hostile_channel_messages());
  // Not a channel's: a rendezvous chunk notification for a receive that does not exist.
  write_notification(runtime, *bait, source, tether::messaging::RequestId{0xfffff, 3}.packed());
  int done = 1;
  CHECK(wait_for(runtime, &done, sizeof done, kReceiver, kDoneTag, true) == Status::done, "done message");
  tether::pinned_free(source);
}

// --- the receiving rank ----------------------------------------------------------------

tether::transport::RemoteBuffer describe_bait(Runtime& runtime, void* bait, std::size_t bytes) {
  auto& engine = runtime.engine();
  std::lock_guard lock(engine.progress_mutex());
  auto peer = engine.peer_index(kHostile);
  auto described = peer ? engine.transport().describe_pool_buffer_for(*peer, bait, bytes)
                        : tl::unexpected(peer.error());
  CHECK(described.has_value(), "{}", described ? "" : described.error().message());
  return described ? *described : tether::transport::RemoteBuffer{};
}

// Progresses until `expected` notifications were rejected (they race with messages).
std::uint64_t rejected_after(Runtime& runtime, std::uint64_t expected) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (tether::channel_stats(runtime).rejected_notifications < expected && std::chrono::steady_clock::now() < deadline)
    runtime.progress();
  return tether::channel_stats(runtime).rejected_notifications;
}

void act_receiver(Runtime& runtime) {
  auto* bait = tether::pinned_alloc(4096, 64);
  auto described = tether::transport::to_bytes(describe_bait(runtime, bait, 4096));
  CHECK(wait_for(runtime, described.data(), described.size(), kHostile, kBaitTag, true) == Status::done, "bait");
  int done = 0;
  CHECK(wait_for(runtime, &done, sizeof done, kHostile, kDoneTag, false) == Status::done && done == 1, "done message");
  std::uint64_t expected = hostile_notifications().size() + hostile_channel_messages().size();
  std::uint64_t rejected = rejected_after(runtime, expected);
  CHECK(rejected == expected, "{} channel notifications rejected, {} expected", rejected, expected);
  fmt::print("rank 0: rejected {} channel notifications\n", rejected);
  tether::pinned_free(bait);
}

// --- after the attack: both ranks still work -------------------------------------------

void exchange_messages(Runtime& runtime) {
  int peer = 1 - runtime.rank();
  for (std::size_t bytes : {std::size_t{100}, std::size_t{1} << 20}) {
    std::vector<std::byte> out(bytes), in(bytes);
    fill(out, bytes + static_cast<std::size_t>(runtime.rank()));
    Request send, receive;
    CHECK(runtime.irecv(in.data(), bytes, peer, 10, receive) != Status::error, "irecv");
    CHECK(runtime.isend(out.data(), bytes, peer, 10, send) != Status::error, "isend");
    CHECK(runtime.wait(receive) == Status::done && runtime.wait(send) == Status::done, "{}", runtime.last_error().message());
    CHECK(filled_with(in, bytes + static_cast<std::size_t>(peer)), "{} bytes from rank {} differ", bytes, peer);
  }
}

void stream_channel(Runtime& runtime, Channels& channels) {
  constexpr int kMessages = 16;
  for (int i = 0; i < kMessages; ++i) {
    std::span<std::byte> buffer;
    while (channels.out.next_buffer(buffer) == Status::retry) {
    }
    fill(buffer.first(200), 1000 + static_cast<std::uint64_t>(runtime.rank() * kMessages + i));
    Status status = Status::retry;
    while (status == Status::retry) status = channels.out.start(200);
    CHECK(status != Status::error, "start: {}", channels.out.last_error().message());
    std::span<const std::byte> message;
    CHECK(channels.in.wait(message) == Status::done, "{}", channels.in.last_error().message());
    std::uint64_t seed = 1000 + static_cast<std::uint64_t>((1 - runtime.rank()) * kMessages + i);
    CHECK(message.size() == 200 && filled_with(message, seed), "channel message {} differs", i);
    CHECK(channels.in.release() == Status::done, "{}", channels.in.last_error().message());
  }
  CHECK(channels.out.wait() == Status::done, "{}", channels.out.last_error().message());
}

// --- last, since on tcp;ofi_rxm it breaks the pair's connection: a made-up key --------

// Rank 1 sends a get RTS whose source is a made-up address and key, then keeps its
// endpoint progressing (tcp answers reads from there) for a while.
void send_bogus_get(Runtime& runtime) {
  send_raw(runtime, {tether::hostile::bogus_get(kHostile, kBogusGetTag, kBogusGetBytes)});
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) runtime.progress();
}

// The matched receive must fail. libfabric 1.17's shm provider reports that failed read
// with no operation context, so the engine cannot tell which receive it was: there the
// receive stays pending (a known hole, docs/RELIABILITY.md), which this asserts too.
void check_bogus_get(Runtime& runtime, Request& bogus_get) {
  bool context_lost = runtime.engine().transport().name().starts_with("ofi:shm");
  tether::MessageInfo info;
  Status got = Status::posted;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(context_lost ? 3 : 30);
  while (got == Status::posted && std::chrono::steady_clock::now() < until) got = runtime.test(bogus_get, &info);
  if (context_lost) {
    CHECK(got == Status::posted, "the get from a made-up key finished on ofi:shm: libfabric now reports it, update the test");
    fmt::print("rank 0: the get from a made-up key stays pending on {}\n", runtime.engine().transport().name());
    return;
  }
  CHECK(got == Status::error && info.error != tether::Errc::ok, "a get from a made-up key finished with {} ({})",
        static_cast<int>(got), tether::errc_name(info.error));
  fmt::print("rank 0: the get from a made-up key failed with {}\n", tether::errc_name(info.error));
}

void bogus_get_phase(Runtime& runtime) {
  static std::vector<std::byte> target(kBogusGetBytes);  // outlives the runtime: may stay posted
  Request receive;
  if (runtime.rank() == kReceiver)
    CHECK(runtime.irecv(target.data(), target.size(), kHostile, kBogusGetTag, receive) != Status::error, "irecv");
  (void)runtime.barrier();
  if (runtime.rank() == kHostile) send_bogus_get(runtime);
  else check_bogus_get(runtime, receive);
}

}  // namespace

int main() {
  auto runtime = tether::testing::start_job_or_exit("tether-hostile-check", 2);
  Runtime& r = *runtime;
  Channels channels = connect_channels(r);
  if (r.rank() == kHostile) act_hostile(r);
  else act_receiver(r);
  exchange_messages(r);
  stream_channel(r, channels);
  bogus_get_phase(r);
  if (tether::testing::rank_checks_passed()) fmt::print("rank {}: hostile passed\n", r.rank());
  return tether::testing::rank_checks_passed() ? 0 : 1;
}
