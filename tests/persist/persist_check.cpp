// tether-persist-check SCENARIO [COUNT]: run by every rank of a job (tether-run or
// mpirun). Each scenario asserts on the bytes that landed, on counters and on error
// codes; exit 0 = pass.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "runtime/base/config.hpp"
#include "runtime/messaging/engine.hpp"
#include "tether/persist.hpp"
#include "tether/pool.hpp"
#include "tether/runtime.hpp"
#include "tests/support/pattern.hpp"
#include "tests/support/rank_check.hpp"

namespace {

using tether::ChannelShape;
using tether::ChannelStats;
using tether::ReceiveChannel;
using tether::Runtime;
using tether::SendChannel;
using tether::Status;
using Bytes = std::span<const std::byte>;
using tether::testing::fill;
using tether::testing::matches;

std::uint64_t g_count = 0;  // messages per scenario, from argv (0: the scenario's default)


std::uint64_t count_or(std::uint64_t fallback) { return g_count > 0 ? g_count : fallback; }

SendChannel make_send(Runtime& runtime, const ChannelShape& shape) {
  auto channel = SendChannel::create(runtime, shape);
  if (!channel) {
    fmt::print(stderr, "SendChannel::create: {}\n", channel.error().message());
    std::exit(1);
  }
  return std::move(*channel);
}

ReceiveChannel make_receive(Runtime& runtime, const ChannelShape& shape) {
  auto channel = ReceiveChannel::create(runtime, shape);
  if (!channel) {
    fmt::print(stderr, "ReceiveChannel::create: {}\n", channel.error().message());
    std::exit(1);
  }
  return std::move(*channel);
}

// One side of a channel whose peer creates the other side only.
SendChannel connected_send(Runtime& runtime, const ChannelShape& shape) {
  SendChannel out = make_send(runtime, shape);
  CHECK(out.wait_connected().has_value(), "connect");
  return out;
}

ReceiveChannel connected_receive(Runtime& runtime, const ChannelShape& shape) {
  ReceiveChannel in = make_receive(runtime, shape);
  CHECK(in.wait_connected().has_value(), "connect");
  return in;
}

void connect(SendChannel& out, ReceiveChannel& in) {
  SendChannel* sends[] = {&out};
  ReceiveChannel* receives[] = {&in};
  auto connected = tether::wait_connected(sends, receives);
  CHECK(connected.has_value(), "{}", connected ? "" : connected.error().message());
}

Status start_when_possible(SendChannel& channel, std::size_t bytes, std::uint64_t* retries = nullptr) {
  for (;;) {
    Status status = channel.start(bytes);
    if (status != Status::retry) return status;
    if (retries != nullptr) ++*retries;
  }
}

// A token from rank `from` to its peer: the peer's next step comes after `from`'s last.
void hand_token(Runtime& runtime, int from, int peer) {
  int token = 0;
  tether::Request request;
  Status posted = runtime.rank() == from ? runtime.isend(&token, sizeof token, peer, 5, request)
                                         : runtime.irecv(&token, sizeof token, peer, 5, request);
  CHECK(posted != Status::error && runtime.wait(request) == Status::done, "the token from rank {}", from);
}

// The size of message `i` of a stream through slots of `slot_bytes`: every size up to the slot.
std::size_t stream_message_bytes(std::uint64_t i, std::size_t slot_bytes) {
  return i % 7 == 0 ? slot_bytes : (i * 37) % (slot_bytes + 1);
}

// Sends `count` messages of rotating sizes; the buffer of each is produced in place.
// `retries` counts the times the sender was held back: no credit for start(), or (where a
// write completes only once the receiver answers it: tcp-own) the slot's buffer still busy.
void send_stream(SendChannel& out, int me, std::uint64_t count, std::uint64_t* retries = nullptr) {
  const std::size_t slot = out.shape().slot_bytes;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::span<std::byte> buffer;
    while (out.next_buffer(buffer) == Status::retry)
      if (retries != nullptr) ++*retries;
    std::size_t bytes = stream_message_bytes(i, slot);
    fill(buffer.first(bytes), static_cast<std::uint64_t>(me), i);
    Status status = start_when_possible(out, bytes, retries);
    CHECK(status != Status::error, "start {}: {}", i, out.last_error().message());
    if (status == Status::error) return;
  }
  CHECK(out.wait() == Status::done, "wait: {}", out.last_error().message());
}

// Takes and checks `count` messages of send_stream; returns the number of different places
// (slots, or flag lines for small messages on shm-own) they were handed out in.
std::size_t receive_stream(ReceiveChannel& in, int peer, std::uint64_t count, std::chrono::microseconds hold = {}) {
  const std::size_t slot = in.shape().slot_bytes;
  std::uint64_t bad = 0;
  std::unordered_set<const std::byte*> places;
  for (std::uint64_t i = 0; i < count; ++i) {
    Bytes message;
    Status status = in.wait(message);
    CHECK(status == Status::done, "wait {}: {}", i, in.last_error().message());
    if (status != Status::done) return places.size();
    places.insert(message.data());
    std::size_t bytes = stream_message_bytes(i, slot);
    if (hold.count() > 0) std::this_thread::sleep_for(hold);  // a slow receiver holds the slot
    if (message.size() != bytes || !matches(message, static_cast<std::uint64_t>(peer), i)) ++bad;
    CHECK(in.release() == Status::done, "release {}: {}", i, in.last_error().message());
  }
  CHECK(bad == 0, "{} of {} messages from rank {} differ from what was sent", bad, count, peer);
  return places.size();
}

// Rank 0 streams to rank 1 through rotating slots, every message checked; the slots must
// have been reused in turn (more than one place), not one slot for every message.
void integrity(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  std::uint64_t count = count_or(1000000);
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 4, .slot_bytes = 256, .slots = 16};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    send_stream(out, 0, count);
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    std::size_t places = receive_stream(in, 0, count);
    CHECK(places > 1, "{} messages landed in {} place", count, places);
    fmt::print("rank 1: {} messages checked, handed out from {} places\n", count, places);
  }
}

// Run with TETHER_CHANNEL_CREDIT_BATCH=B (1, 2, 4 or 8) where credits are RDMA writes and no
// progress thread runs: rank 1 takes all 8 messages of a stream before releasing any, then
// releases them back to back, which must make 8 / B credit writes, not one per release.
void credit_batch(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const auto batch =
      static_cast<std::uint64_t>(tether::config::Config::global().integer("TETHER_CHANNEL_CREDIT_BATCH"));
  CHECK(batch > 0 && 8 % batch == 0, "run with TETHER_CHANNEL_CREDIT_BATCH=1, 2, 4 or 8, not {}", batch);
  if (batch == 0 || 8 % batch != 0) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 33, .slot_bytes = 64, .slots = 8};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    send_stream(out, 0, shape.slots);
    hand_token(runtime, 1, 1);
    return;
  }
  ReceiveChannel in = connected_receive(runtime, shape);
  std::vector<Bytes> held(shape.slots);
  for (std::uint64_t i = 0; i < held.size(); ++i)
    CHECK(in.wait(held[i]) == Status::done && matches(held[i], 0, i), "message {}: {}", i, in.last_error().message());
  const std::uint64_t before = tether::channel_stats(runtime).credit_writes;
  for (std::size_t i = 0; i < held.size(); ++i) CHECK(in.release() == Status::done, "{}", in.last_error().message());
  const std::uint64_t writes = tether::channel_stats(runtime).credit_writes - before;
  CHECK(writes == shape.slots / batch, "{} releases in batches of {} made {} credit writes", shape.slots, batch,
        writes);
  fmt::print("rank 1: {} releases, {} credit writes\n", shape.slots, writes);
  hand_token(runtime, 1, 0);
}

// Ranks 0 and 1 stream to each other at once, a sending and a receiving thread each.
// Five slots: positions by division (a power of two takes a mask; "integrity" has 16).
void duplex(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  int peer = 1 - runtime.rank();
  std::uint64_t count = count_or(20000);
  ChannelShape shape{.peer = peer, .tag = 5, .slot_bytes = 256, .slots = 5};
  SendChannel out = make_send(runtime, shape);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  std::thread receiver([&] { receive_stream(in, peer, count); });
  send_stream(out, runtime.rank(), count);
  receiver.join();
}

// Ranks 0 and 1 answer each other's messages over two slots, every message checked. On
// shm-own's direct path the credit of each message released rides in the flag line of the
// answer (no credit word stored while the peer waits for the answer).
void reply_credits(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  int me = runtime.rank();
  int peer = 1 - me;
  ChannelShape shape{.peer = peer, .tag = 19, .slot_bytes = 256, .slots = 2};
  SendChannel out = make_send(runtime, shape);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  auto before = tether::channel_stats(runtime);
  std::uint64_t count = count_or(20000);
  std::uint64_t bad = 0;
  auto send = [&](std::uint64_t i) {
    std::size_t bytes = stream_message_bytes(i, shape.slot_bytes);
    fill(out.buffer().first(bytes), static_cast<std::uint64_t>(me), i);
    CHECK(start_when_possible(out, bytes) != Status::error, "start {}: {}", i, out.last_error().message());
    CHECK(out.wait() == Status::done, "wait {}: {}", i, out.last_error().message());
  };
  auto receive = [&](std::uint64_t i) {
    Bytes message;
    CHECK(in.wait(message) == Status::done, "wait {}: {}", i, in.last_error().message());
    bool whole = message.size() == stream_message_bytes(i, shape.slot_bytes);
    if (!whole || !matches(message, static_cast<std::uint64_t>(peer), i)) ++bad;
    CHECK(in.release() == Status::done, "release {}: {}", i, in.last_error().message());
  };
  for (std::uint64_t i = 0; i < count; ++i) {
    if (me == 0) send(i);
    receive(i);
    if (me == 1) send(i);
  }
  CHECK(bad == 0, "{} of {} answers from rank {} differ from what was sent", bad, count, peer);
  auto after = tether::channel_stats(runtime);
  bool direct = after.direct_stores - before.direct_stores == count;
  auto carried = after.piggybacked_credits - before.piggybacked_credits;
  auto stored = after.credit_stores - before.credit_stores;
  auto rejected = after.rejected_notifications - before.rejected_notifications;
  CHECK(rejected == 0, "{} notifications rejected", rejected);
  // A credit waits for an answer to carry it once the side answered before: all but rank
  // 1's first (no answer yet) and rank 0's last (no message after it).
  if (direct) {
    CHECK(carried >= count - 1, "{} of {} credits rode in a flag line", carried, count);
    CHECK(stored <= 1, "{} credit words stored for {} messages", stored, count);
  }
  fmt::print("rank {}: {} answers checked; {} credits carried by answers, {} credit words stored\n", me, count,
             carried, stored);
}

// Rank 1 answers each of rank 0's messages (two slots) with an acknowledgement (eight
// slots); rank 0 reads the acknowledgements only after starting all eight messages. Where
// an answer carries the credit of the message it answers (shm-own's direct path), rank 0
// cannot read those credits before its sixth start: rank 1 must store them into the credit
// word once it carries nothing more, or both wait for ever (start() answers retry for 30 s
// and the scenario fails). Every message and acknowledgement is checked.
void lazy_acknowledgements(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  constexpr std::uint64_t kMessages = 8;
  ChannelShape data{.peer = 1 - runtime.rank(), .tag = 20, .slot_bytes = 64, .slots = 2};
  ChannelShape acks{.peer = 1 - runtime.rank(), .tag = 21, .slot_bytes = 64, .slots = kMessages};
  std::uint64_t rounds = count_or(200);
  std::uint64_t bad = 0;
  auto send = [&](SendChannel& out, std::uint64_t sequence) {
    fill(out.buffer().first(out.shape().slot_bytes), static_cast<std::uint64_t>(runtime.rank()), sequence);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    Status status = Status::retry;
    while (status == Status::retry && std::chrono::steady_clock::now() < deadline)
      status = out.start(out.shape().slot_bytes);
    CHECK(status == Status::done || status == Status::posted, "start {}: {}", sequence,
          status == Status::retry ? "no credit for 30 s" : out.last_error().message());
    CHECK(out.wait() == Status::done, "wait {}: {}", sequence, out.last_error().message());
  };
  auto receive = [&](ReceiveChannel& in, std::uint64_t sequence) {
    Bytes message;
    CHECK(in.wait(message) == Status::done, "wait {}: {}", sequence, in.last_error().message());
    if (!matches(message, static_cast<std::uint64_t>(1 - runtime.rank()), sequence)) ++bad;
    CHECK(in.release() == Status::done, "release {}: {}", sequence, in.last_error().message());
  };
  SendChannel out = make_send(runtime, runtime.rank() == 0 ? data : acks);
  ReceiveChannel in = make_receive(runtime, runtime.rank() == 0 ? acks : data);
  connect(out, in);
  for (std::uint64_t round = 0; round < rounds && tether::testing::rank_checks_passed(); ++round) {
    for (std::uint64_t k = 0; k < kMessages; ++k) {
      std::uint64_t sequence = round * kMessages + k;
      if (runtime.rank() == 0) send(out, sequence);
      else receive(in, sequence), send(out, sequence);
    }
    if (runtime.rank() == 0)
      for (std::uint64_t k = 0; k < kMessages; ++k) receive(in, round * kMessages + k);
  }
  CHECK(bad == 0, "{} messages from rank {} differ from what was sent", bad, 1 - runtime.rank());
  fmt::print("rank {}: {} rounds of {} messages, acknowledgements read late\n", runtime.rank(), rounds, kMessages);
}

// Settings read through the runtime's config table, as the library reads them.
bool streams_every_store() { return tether::config::Config::global().text("TETHER_SHM_STREAMING_COPY") == "0"; }
bool split_copy_off() { return tether::config::Config::global().size_bytes("TETHER_CHANNEL_SPLIT_COPY") == 0; }

// Large messages (rendezvous sizes for send/receive) through few slots. On the direct path
// the full-slot ones are split copies (TETHER_CHANNEL_SPLIT_COPY, 256 KiB by default).
void large(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 6, .slot_bytes = std::size_t{4} << 20, .slots = 2};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    send_stream(out, 0, count_or(40));
    // TETHER_SHM_STREAMING_COPY=0 streams every direct store into a slot (not those carried
    // in the flag line; a split copy counts once, for the sender's pieces); unset or off, none.
    bool streams = streams_every_store();
    ChannelStats stats = tether::channel_stats(runtime);
    std::uint64_t into_slots = stats.direct_stores - stats.flag_line_messages;
    CHECK(streams ? stats.streamed_stores == into_slots && into_slots > 0 : stats.streamed_stores == 0,
          "{} of {} direct stores into slots streamed with TETHER_SHM_STREAMING_COPY={}", stats.streamed_stores,
          into_slots, streams ? "0" : "(unset)");
    bool splits = into_slots > 0 && !split_copy_off();
    CHECK(splits ? stats.split_copies > 0 && stats.split_copies <= into_slots : stats.split_copies == 0,
          "{} split copies of {} direct stores into slots", stats.split_copies, into_slots);
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    receive_stream(in, 0, count_or(40));
  }
}

// Split copies of many lengths, back to back: odd sizes from half a slot to a whole one
// (short last pieces), each produced in the buffer once next_buffer() frees it (the
// receiver may still read the last one's) and checked where it landed. The receiver waits
// for each, so it copies pieces of them itself; with TETHER_CHANNEL_SPLIT_COPY=0 none.
void split_sizes(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 31, .slot_bytes = (std::size_t{1} << 20) + 4104, .slots = 2};
  std::uint64_t count = count_or(300);
  auto bytes_of = [&](std::uint64_t i) { return shape.slot_bytes - (i * 40961) % (shape.slot_bytes / 2); };
  bool off = split_copy_off();
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    for (std::uint64_t i = 0; i < count && tether::testing::rank_checks_passed(); ++i) {
      std::span<std::byte> buffer;
      while (out.next_buffer(buffer) == Status::retry) {}
      fill(buffer.first(bytes_of(i)), 0, i);
      CHECK(start_when_possible(out, bytes_of(i)) != Status::error, "start {}: {}", i, out.last_error().message());
    }
    CHECK(out.wait() == Status::done, "wait: {}", out.last_error().message());
    ChannelStats stats = tether::channel_stats(runtime);
    CHECK(stats.split_copies == (off ? 0 : count), "{} split copies of {} messages", stats.split_copies, count);
    fmt::print("rank 0: {} split copies, {} pieces copied here\n", stats.split_copies, stats.pieces_sender_copied);
    return;
  }
  ReceiveChannel in = connected_receive(runtime, shape);
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < count && tether::testing::rank_checks_passed(); ++i) {
    Bytes message;
    CHECK(in.wait(message) == Status::done, "wait {}: {}", i, in.last_error().message());
    if (message.size() != bytes_of(i) || !matches(message, 0, i)) ++bad;
    CHECK(in.release() == Status::done, "release {}: {}", i, in.last_error().message());
  }
  CHECK(bad == 0, "{} of {} split copies differ from what was sent", bad, count);
  std::uint64_t pieces = tether::channel_stats(runtime).pieces_receiver_copied;
  CHECK(off ? pieces == 0 : pieces > 0, "the receiver copied {} pieces (TETHER_CHANNEL_SPLIT_COPY {})", pieces,
        off ? "0" : "on");
  fmt::print("rank 1: {} pieces copied here\n", pieces);
}

// A receiver that holds each message: the sender meets back-pressure (retry), and no held
// message is ever overwritten.
void slow_receiver(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 9, .slot_bytes = 512, .slots = 4};
  std::uint64_t count = count_or(400);
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    std::uint64_t retries = 0;
    send_stream(out, 0, count, &retries);
    CHECK(retries > 0, "the sender never met back-pressure from a slow receiver ({} retries)", retries);
    fmt::print("rank 0: {} retries while the receiver held its slots\n", retries);
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    receive_stream(in, 0, count, std::chrono::microseconds(200));
  }
}

// The receiver holds 1 to 8 messages at a time and checks them only once it holds them
// all, so a sender writing into a slot not yet released (the direct path picks its slots)
// shows as a damaged message. Large slots: the direct path's waits for a warm slot time
// out on the held ones.
void hold_slots(Runtime& runtime, std::size_t slot_bytes, std::uint64_t default_count) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 14, .slot_bytes = slot_bytes, .slots = 8};
  std::uint64_t count = count_or(default_count);
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    send_stream(out, 0, count);
    fmt::print("rank 0: {} waits for a warm slot\n", tether::channel_stats(runtime).warm_slot_waits);
    return;
  }
  ReceiveChannel in = connected_receive(runtime, shape);
  std::uint64_t bad = 0;
  for (std::uint64_t first = 0, hold = 1; first < count; first += hold, hold = hold % shape.slots + 1) {
    std::vector<Bytes> held;
    for (std::uint64_t i = first; i < std::min(count, first + hold); ++i) {
      CHECK(in.wait(held.emplace_back()) == Status::done, "wait {}: {}", i, in.last_error().message());
    }
    for (std::uint64_t i = first; i < first + held.size(); ++i) {
      std::size_t bytes = i % 7 == 0 ? shape.slot_bytes : (i * 37) % (shape.slot_bytes + 1);
      if (held[i - first].size() != bytes || !matches(held[i - first], 0, i)) ++bad;
    }
    for (std::size_t k = 0; k < held.size(); ++k) CHECK(in.release() == Status::done, "release");
  }
  CHECK(bad == 0, "{} of {} messages damaged while held", bad, count);
}

void held_slots(Runtime& runtime) { hold_slots(runtime, 512, 20000); }
void held_large_slots(Runtime& runtime) { hold_slots(runtime, std::size_t{1} << 20, 200); }

// Messages 0..count-1 alternate between ranks 0 and 1 (rank 0 sends the even ones), each
// a full slot checked where it lands; `landed` sees each message received. Returns how
// many messages this rank sent.
template <class Landed>
std::uint64_t ping_pong(Runtime& runtime, SendChannel& out, ReceiveChannel& in, const ChannelShape& shape,
                        std::uint64_t count, Landed&& landed) {
  std::uint64_t sent = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if ((i % 2 == 0) == (runtime.rank() == 0)) {
      fill(out.buffer().first(shape.slot_bytes), static_cast<std::uint64_t>(runtime.rank()), i);
      CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "start {}", i);
      CHECK(out.wait() == Status::done, "wait {}: {}", i, out.last_error().message());
      ++sent;
      continue;
    }
    Bytes message;
    CHECK(in.wait(message) == Status::done, "wait {}: {}", i, in.last_error().message());
    CHECK(message.size() == shape.slot_bytes && matches(message, static_cast<std::uint64_t>(shape.peer), i),
          "message {} differs from what was sent", i);
    landed(message);
    CHECK(in.release() == Status::done, "release {}", i);
  }
  return sent;
}

// A ping-pong over 4 slots. A direct store, or a write or send over a transport that
// delivers in order, takes the slot released last, so every message lands in one slot
// (still in cache); elsewhere messages rotate through all four. 4 KiB messages travel as
// sends over tcp, large ones as writes (above TETHER_CHANNEL_INLINE_MAX), whose credits
// must reach the peer before the write it answers (sent ahead where the slots outgrow the
// L2: slots of 1 MiB or the L2's size, whichever is larger, always do).
void warm_slot_of(Runtime& runtime, std::size_t slot_bytes, std::uint64_t messages) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 15, .slot_bytes = slot_bytes, .slots = 4};
  SendChannel out = make_send(runtime, shape);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  auto picked_before = tether::channel_stats(runtime).sender_picked_slots;
  std::set<const std::byte*> landed_at;
  std::uint64_t sent = ping_pong(runtime, out, in, shape, messages,
                                 [&](Bytes message) { landed_at.insert(message.data()); });
  bool picked = tether::channel_stats(runtime).sender_picked_slots - picked_before == sent;
  std::size_t expected = picked ? 1 : shape.slots;
  CHECK(landed_at.size() == expected, "messages landed in {} slots, expected {} ({})", landed_at.size(), expected,
        picked ? "the sender reuses the slot released last" : "each message lands in its turn's slot");
  fmt::print("rank {}: {} messages landed in {} slot(s) ({})\n", runtime.rank(), sent, landed_at.size(),
             picked ? "slots picked by the sender" : "slots in turn");
}

void warm_slot(Runtime& runtime) { warm_slot_of(runtime, 4096, count_or(1000)); }
void warm_large_slot(Runtime& runtime) {
  auto l2 = static_cast<std::size_t>(std::max(0L, ::sysconf(_SC_LEVEL2_CACHE_SIZE)));
  warm_slot_of(runtime, std::max(std::size_t{1} << 20, (l2 + 4095) / 4096 * 4096), count_or(20));
}

// The pool memory a send channel of 4 slots of 1 MiB takes: one buffer on the direct
// path (it copies at start()), one per slot elsewhere. Messages still land intact.
void send_buffers(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 16, .slot_bytes = kMiB, .slots = 4};
  std::uint64_t carved_before = tether::pool_stats().bytes_carved;
  SendChannel out = make_send(runtime, shape);
  auto buffers = static_cast<int>((tether::pool_stats().bytes_carved - carved_before + kMiB / 2) / kMiB);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  auto direct_before = tether::channel_stats(runtime).direct_stores;
  std::uint64_t sent = ping_pong(runtime, out, in, shape, count_or(20), [](Bytes) {});
  bool direct = tether::channel_stats(runtime).direct_stores - direct_before == sent;
  int expected = direct ? 1 : static_cast<int>(shape.slots);
  CHECK(buffers == expected, "the send channel took {} MiB of pool, expected {} ({})", buffers, expected,
        direct ? "direct stores copy at start" : "a buffer per slot");
  fmt::print("rank {}: a send channel of 4 x 1 MiB slots holds {} buffer(s) ({})\n", runtime.rank(), buffers,
             direct ? "direct stores" : "writes or sends");
}

// Progresses for `time`: where notifications follow their writes as messages
// (TETHER_OFI_NOTIFY=send), they leave once the writes complete, which takes polling.
void pause_with_progress(Runtime& runtime, std::chrono::milliseconds time) {
  for (auto until = std::chrono::steady_clock::now() + time; std::chrono::steady_clock::now() < until;)
    runtime.progress();
}

// Partitions marked ready out of order arrive out of order; the message completes whole.
void partitioned(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  constexpr std::uint32_t kParts = 8;
  constexpr std::size_t kPartBytes = 4096;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 11, .slot_bytes = kParts * kPartBytes, .slots = 2,
                     .partitions = kParts};
  std::uint64_t count = count_or(50);
  // Partition p of message i holds the pattern of sequence i * kParts + p.
  auto partition_of = [](auto message, std::uint32_t p) { return message.subspan(p * kPartBytes, kPartBytes); };
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    for (std::uint64_t i = 0; i < count; ++i) {
      std::span<std::byte> buffer;
      while (out.next_buffer(buffer) == Status::retry) {
      }
      // Even messages are produced before start(); odd ones after it, each partition just
      // before its ready(), in the buffer the started message leaves from (as MPI_Start, then
      // MPI_Pready).
      if (i % 2 == 0)
        for (std::uint32_t p = 0; p < kParts; ++p) fill(partition_of(buffer, p), 0, i * kParts + p);
      CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "{}", out.last_error().message());
      // Message 0: the last partition first and partition 0 only after a pause; the others
      // in an order of their own (5 and 8 share no factor: every partition once).
      for (std::uint32_t k = 0; k < kParts; ++k) {
        auto p = static_cast<std::uint32_t>(i == 0 ? kParts - 1 - k : (i * 3 + k * 5) % kParts);
        if (i == 0 && p == 0) pause_with_progress(runtime, std::chrono::milliseconds(100));
        if (i % 2 == 1) fill(partition_of(out.buffer(), p), 0, i * kParts + p);
        while (out.ready(p) == Status::retry) {
        }
      }
      CHECK(out.wait() == Status::done, "{}", out.last_error().message());
    }
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    bool saw_last_before_first = false;
    while (!in.arrived(kParts - 1)) {
    }
    saw_last_before_first = !in.arrived(0);
    CHECK(saw_last_before_first, "partition {} arrived but partition 0 too, despite a 100 ms pause", kParts - 1);
    // Messages are taken two at a time, holding both slots: the third has nowhere to land,
    // so none of its partitions may show as arrived.
    for (std::uint64_t i = 0; i < count; i += 2) {
      std::uint64_t held = std::min<std::uint64_t>(2, count - i);
      for (std::uint64_t k = 0; k < held; ++k) {
        Bytes message;
        CHECK(in.wait(message) == Status::done, "{}", in.last_error().message());
        CHECK(message.size() == shape.slot_bytes, "message {}: {} bytes", i + k, message.size());
        for (std::uint32_t p = 0; p < kParts && message.size() == shape.slot_bytes; ++p)
          CHECK(matches(partition_of(message, p), 0, (i + k) * kParts + p), "partition {} of message {} differs", p,
                i + k);
      }
      if (held == shape.slots)
        for (std::uint32_t p = 0; p < kParts; ++p)
          CHECK(!in.arrived(p), "partition {} of message {} arrived with every slot held", p, i + 2);
      for (std::uint64_t k = 0; k < held; ++k) CHECK(in.release() == Status::done, "{}", in.last_error().message());
    }
  }
}

// Every rank opens kPerTag channels with one tag and one channel with each of kTags tags to
// every rank (itself included); the k-th channel of a (peer, tag) pairs with the k-th.
void many(Runtime& runtime) {
  constexpr int kPerTag = 4;
  constexpr int kTags = 4;
  constexpr std::uint64_t kMessages = 50;
  std::vector<SendChannel> sends;
  std::vector<ReceiveChannel> receives;
  std::vector<int> peers;
  for (int peer = 0; peer < runtime.size(); ++peer)
    for (int k = 0; k < kPerTag + kTags; ++k) {
      ChannelShape shape{.peer = peer, .tag = k < kPerTag ? 100 : 200 + k, .slot_bytes = 64, .slots = 2};
      sends.push_back(make_send(runtime, shape));
      receives.push_back(make_receive(runtime, shape));
      peers.push_back(peer);
    }
  std::vector<SendChannel*> send_list;
  std::vector<ReceiveChannel*> receive_list;
  for (auto& channel : sends) send_list.push_back(&channel);
  for (auto& channel : receives) receive_list.push_back(&channel);
  auto connected = tether::wait_connected(send_list, receive_list);
  CHECK(connected.has_value(), "{}", connected ? "" : connected.error().message());
  // Even messages go channel by channel, odd ones through start_all and wait_all.
  std::vector<std::size_t> lengths(sends.size(), sizeof(std::uint64_t));
  std::vector<Bytes> landed(receives.size());
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < kMessages; ++i) {
    const bool by_set = i % 2 == 1;
    for (std::size_t c = 0; c < sends.size(); ++c) {
      std::uint64_t stamp = (static_cast<std::uint64_t>(runtime.rank()) << 40) | (c % (kPerTag + kTags)) << 20 | i;
      std::memcpy(sends[c].buffer().data(), &stamp, sizeof stamp);
      if (!by_set)
        CHECK(start_when_possible(sends[c], sizeof stamp) != Status::error, "{}", sends[c].last_error().message());
    }
    if (by_set) {
      CHECK(tether::start_all(send_list, lengths) == Status::posted, "start_all of message {}", i);
      CHECK(tether::wait_all(receive_list, landed) == Status::done, "wait_all of message {}", i);
    }
    for (std::size_t c = 0; c < receives.size(); ++c) {
      if (!by_set)
        CHECK(receives[c].wait(landed[c]) == Status::done, "{}", receives[c].last_error().message());
      std::uint64_t stamp = 0;
      std::memcpy(&stamp, landed[c].data(), std::min(sizeof stamp, landed[c].size()));
      std::uint64_t want = (static_cast<std::uint64_t>(peers[c]) << 40) | (c % (kPerTag + kTags)) << 20 | i;
      bad += stamp == want && landed[c].size() == sizeof stamp ? 0 : 1;
      CHECK(receives[c].release() == Status::done, "{}", receives[c].last_error().message());
    }
    CHECK(tether::wait_all(send_list) == Status::done, "wait_all");
  }
  CHECK(bad == 0, "{} messages reached the wrong channel, came out of order or in the wrong length", bad);
}

// After creation: no registration, no handshake or other message, no copy per message.
void no_overhead(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 13, .slot_bytes = 1024, .slots = 4};
  SendChannel out = make_send(runtime, shape);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  auto pool_before = tether::pool_stats().registrations;
  auto messages_before = runtime.engine().messages_sent();
  auto channels_before = tether::channel_stats(runtime);
  std::uint64_t count = count_or(20000);
  std::thread receiver([&] { receive_stream(in, 1 - runtime.rank(), count); });
  send_stream(out, runtime.rank(), count);
  receiver.join();
  auto channels_after = tether::channel_stats(runtime);
  CHECK(tether::pool_stats().registrations == pool_before, "{} registrations", tether::pool_stats().registrations - pool_before);
  CHECK(runtime.engine().messages_sent() == messages_before, "{} messages sent besides the writes",
        runtime.engine().messages_sent() - messages_before);
  CHECK(channels_after.handshake_messages == channels_before.handshake_messages, "handshakes after creation");
  CHECK(channels_after.user_registrations == channels_before.user_registrations, "registrations after creation");
  CHECK(channels_after.send_copies == channels_before.send_copies, "{} copies", channels_after.send_copies);
  // Each message is one RMA write, or one send from its buffer (small messages where sends
  // beat writes, TETHER_CHANNEL_INLINE_MAX).
  auto writes = channels_after.data_writes - channels_before.data_writes;
  auto sends = channels_after.data_messages - channels_before.data_messages;
  CHECK(writes + sends == count, "{} writes and {} sends for {} messages", writes, sends, count);
  // Direct stores (shm-own) carry every message that fits in the flag line there.
  std::uint64_t fit_in_line = 0;
  for (std::uint64_t i = 0; i < count; ++i)
    fit_in_line += stream_message_bytes(i, shape.slot_bytes) <= tether::kFlagLineMessageBytes;
  bool direct = channels_after.direct_stores - channels_before.direct_stores == count;
  auto in_line = channels_after.flag_line_messages - channels_before.flag_line_messages;
  CHECK(in_line == (direct ? fit_in_line : 0), "{} of {} messages in the flag line, expected {}", in_line, count,
        direct ? fit_in_line : 0);
  fmt::print("rank {}: {} messages ({} writes, {} sends): {} in the flag line, 0 registrations, 0 engine messages, "
             "0 copies, {} credit writes, {} credit messages, {} piggybacked credits\n",
             runtime.rank(), count, writes, sends, in_line, channels_after.credit_writes - channels_before.credit_writes,
             channels_after.credit_messages - channels_before.credit_messages,
             channels_after.piggybacked_credits - channels_before.piggybacked_credits);
}

// User memory on both sides: registered once at creation, never again.
void user_buffers(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 15, .slot_bytes = 8192, .slots = 4};
  std::vector<std::byte> out_memory(shape.slot_bytes), in_memory(shape.slot_bytes * shape.slots);
  auto out = SendChannel::create(runtime, shape, out_memory);
  auto in = ReceiveChannel::create(runtime, shape, in_memory);
  CHECK(out && in, "create with user memory: {}", !out ? out.error().message() : !in ? in.error().message() : "");
  if (!out || !in) return;
  connect(*out, *in);
  auto before = tether::channel_stats(runtime);
  CHECK(before.user_registrations >= 2, "{} user registrations", before.user_registrations);
  std::uint64_t count = count_or(2000);
  for (std::uint64_t i = 0; i < count; ++i) {
    fill(std::span(out_memory).first(shape.slot_bytes), static_cast<std::uint64_t>(runtime.rank()), i);
    CHECK(start_when_possible(*out, shape.slot_bytes) != Status::error, "{}", out->last_error().message());
    CHECK(out->wait() == Status::done, "{}", out->last_error().message());
    Bytes message;
    CHECK(in->wait(message) == Status::done, "{}", in->last_error().message());
    CHECK(message.data() >= in_memory.data() && message.data() < in_memory.data() + in_memory.size(),
          "the message did not land in the user's slots");
    CHECK(matches(message, static_cast<std::uint64_t>(peer), i), "message {} differs", i);
    CHECK(in->release() == Status::done, "{}", in->last_error().message());
  }
  CHECK(tether::channel_stats(runtime).user_registrations == before.user_registrations, "registered again");
}

// A pool sender streaming into a receiver's user-memory slots: where the transport maps
// pool memory only (shm-own) the sender has one buffer but no direct path, so its writes
// take turns on that buffer. Every message must still land whole.
void user_slots(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 18, .slot_bytes = 8192, .slots = 4};
  std::uint64_t count = count_or(2000);
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    send_stream(out, 0, count);
    CHECK(out.wait() == Status::done, "wait: {}", out.last_error().message());
    CHECK(tether::channel_stats(runtime).direct_stores == 0, "direct stores into user memory");
    return;
  }
  std::vector<std::byte> in_memory(shape.slot_bytes * shape.slots);
  auto in = ReceiveChannel::create(runtime, shape, in_memory);
  CHECK(in.has_value(), "create with user memory: {}", in ? "" : in.error().message());
  if (!in) return;
  CHECK(in->wait_connected().has_value(), "connect");
  receive_stream(*in, 0, count);
}

// Channels to this rank itself.
void self(Runtime& runtime) {
  ChannelShape shape{.peer = runtime.rank(), .tag = 17, .slot_bytes = 1000, .slots = 3};
  SendChannel out = make_send(runtime, shape);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  std::uint64_t count = count_or(5000);
  for (std::uint64_t i = 0; i < count; i += 2) {
    for (std::uint64_t j = i; j < i + 2; ++j) {
      fill(out.buffer(), static_cast<std::uint64_t>(runtime.rank()), j);
      CHECK(out.start(shape.slot_bytes) != Status::error, "{}", out.last_error().message());
    }
    for (std::uint64_t j = i; j < i + 2; ++j) {
      Bytes message;
      CHECK(in.wait(message) == Status::done, "{}", in.last_error().message());
      CHECK(matches(message, static_cast<std::uint64_t>(runtime.rank()), j), "message {} differs", j);
      CHECK(in.release() == Status::done, "{}", in.last_error().message());
    }
  }
  { SendChannel closing = std::move(out); }  // the receive side fails once it took all, as with a peer
  Bytes message;
  CHECK(in.wait(message) == Status::error && in.last_error().code == tether::Errc::peer_closed,
        "waiting after the send side closed: {}", in.last_error().message());
}

// Both sides name both shapes when they disagree: per pair of channels rank 1 changes one
// field of rank 0's shape (slot_bytes, slots or partitions), and both ranks' errors must
// name that field's two values.
void mismatch(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  struct Field {
    void (*change)(ChannelShape&);
    const char* zero_value;
    const char* one_value;
  };
  const Field fields[] = {{[](ChannelShape& s) { s.slot_bytes = 2048; }, "slot_bytes 1024", "slot_bytes 2048"},
                          {[](ChannelShape& s) { s.slots = 8; }, "slots 4,", "slots 8,"},
                          {[](ChannelShape& s) { s.partitions = 4; }, "partitions 1", "partitions 4"}};
  int tag = 19;
  for (const Field& field : fields) {
    ChannelShape shape{.peer = 1 - runtime.rank(), .tag = tag++, .slot_bytes = 1024, .slots = 4};
    if (runtime.rank() == 1) field.change(shape);
    std::optional<tether::Expected<void>> connected;
    if (runtime.rank() == 0) {
      SendChannel out = make_send(runtime, shape);
      connected = out.wait_connected();
    } else {
      ReceiveChannel in = make_receive(runtime, shape);
      connected = in.wait_connected();
    }
    CHECK(!connected->has_value(), "a channel mismatched in {} connected", field.one_value);
    if (connected->has_value()) continue;
    std::string text = connected->error().message();
    CHECK(text.find(field.zero_value) != std::string::npos && text.find(field.one_value) != std::string::npos, "{}",
          text);
    fmt::print("rank {}: {}\n", runtime.rank(), text);
  }
}

// Back-pressure on a channel of 2 slots: once the peer holds both messages 1 and 2 without
// releasing them, start() says retry for 100 ms of tries (it neither blocks nor writes: the
// held messages stay intact), and succeeds once the peer released them.
void start_while_the_peer_holds_every_slot(Runtime& runtime, SendChannel& out, ReceiveChannel& in) {
  const auto rank = static_cast<std::uint64_t>(runtime.rank());
  const auto peer = 1 - runtime.rank();
  for (std::uint64_t i = 1; i <= 2; ++i) {
    std::span<std::byte> buffer;
    CHECK(out.wait_buffer(buffer) == Status::done, "{}", out.last_error().message());
    fill(buffer.first(64), rank, i);
    CHECK(start_when_possible(out, 64) != Status::error, "{}", out.last_error().message());
  }
  Bytes held[2];
  for (Bytes& message : held) CHECK(in.wait(message) == Status::done, "{}", in.last_error().message());
  std::uint64_t tries = 1;
  Status status = out.start(64);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (; status == Status::retry && std::chrono::steady_clock::now() < until; ++tries) status = out.start(64);
  CHECK(status == Status::retry, "start() without credit said {} after {} tries", static_cast<int>(status), tries);
  hand_token(runtime, 0, peer);  // neither rank releases before both tried
  hand_token(runtime, 1, peer);
  CHECK(matches(held[0], 1 - rank, 1) && matches(held[1], 1 - rank, 2), "a held message changed");
  for (int i = 0; i < 2; ++i) CHECK(in.release() == Status::done, "{}", in.last_error().message());
  fill(out.buffer().first(64), rank, 3);
  CHECK(start_when_possible(out, 64) != Status::error, "{}", out.last_error().message());
  Bytes message;
  CHECK(in.wait(message) == Status::done && matches(message, 1 - rank, 3), "message 3 after the releases");
  CHECK(in.release() == Status::done, "{}", in.last_error().message());
}

// Wrong sizes, unknown ranks and misuse are refused with the cause; the channel still works.
void bad_input(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  CHECK(!SendChannel::create(runtime, {.peer = runtime.size(), .slot_bytes = 8}), "unknown rank accepted");
  CHECK(!SendChannel::create(runtime, {.peer = 0, .tag = -1, .slot_bytes = 8}), "negative tag accepted");
  CHECK(!SendChannel::create(runtime, {.peer = 0, .slot_bytes = 0}), "0-byte slots accepted");
  CHECK(!SendChannel::create(runtime, {.peer = 0, .slot_bytes = 8, .slots = 0}), "0 slots accepted");
  CHECK(!SendChannel::create(runtime, {.peer = 0, .slot_bytes = 10, .partitions = 3}), "10 bytes in 3 partitions");
  // Refused, not a bad_alloc: the receiver would keep a flag per slot and partition.
  auto too_many = ReceiveChannel::create(runtime, {.peer = 0, .slot_bytes = 1u << 31, .partitions = 1u << 31});
  CHECK(!too_many && too_many.error().message().find("partitions") != std::string::npos, "2^31 partitions accepted");
  std::vector<std::byte> small(4);
  CHECK(!ReceiveChannel::create(runtime, {.peer = 0, .slot_bytes = 8}, small), "a too-small user buffer");
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 21, .slot_bytes = 64, .slots = 2};
  SendChannel out = make_send(runtime, shape);
  ReceiveChannel in = make_receive(runtime, shape);
  connect(out, in);
  CHECK(out.start(65) == Status::error, "65 bytes into 64-byte slots accepted");
  CHECK(out.last_error().message().find("64-byte slots") != std::string::npos, "{}", out.last_error().message());
  CHECK(out.ready(0) == Status::error, "ready() on a whole-message channel accepted");
  CHECK(in.release() == Status::error, "release() with nothing held accepted");
  fill(out.buffer().first(64), static_cast<std::uint64_t>(runtime.rank()), 0);
  CHECK(start_when_possible(out, 64) != Status::error, "{}", out.last_error().message());
  CHECK(out.wait() == Status::done, "{}", out.last_error().message());
  Bytes message;
  CHECK(in.wait(message) == Status::done && matches(message, static_cast<std::uint64_t>(1 - runtime.rank()), 0),
        "the channel does not work after refusals");
  CHECK(in.release() == Status::done, "{}", in.last_error().message());
  start_while_the_peer_holds_every_slot(runtime, out, in);
}


// Channels destroyed with messages in flight (sent, not yet received or released) are
// reported and safe: the next pair with the same tag works and sees only its own data. A
// sender whose receiver closed first fails its next start() with peer_closed.
void close_in_flight(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 25, .slot_bytes = 4096, .slots = 4};
  for (int round = 0; round < 3; ++round) {
    const std::uint64_t base = static_cast<std::uint64_t>(round) * 1000;
    if (runtime.rank() == 0) {
      SendChannel out = make_send(runtime, shape);
      CHECK(out.wait_connected().has_value(), "connect");
      for (std::uint64_t i = 0; i < shape.slots; ++i) {
        std::span<std::byte> buffer;
        while (out.next_buffer(buffer) == Status::retry) {
        }
        fill(buffer, 0, base + i);
        // Rank 1 may have closed after its one message already: a start then says so.
        Status status = start_when_possible(out, shape.slot_bytes);
        if (status == Status::error && i > 0 && out.last_error().code == tether::Errc::peer_closed) break;
        CHECK(status != Status::error, "{}", out.last_error().message());
      }  // destroyed here with writes possibly in flight
    } else {
      ReceiveChannel in = make_receive(runtime, shape);
      CHECK(in.wait_connected().has_value(), "connect");
      Bytes message;
      CHECK(in.wait(message) == Status::done, "{}", in.last_error().message());
      CHECK(matches(message, 0, base), "round {}: the first message holds another round's data", round);
    }  // destroyed holding one message and leaving three unread
    CHECK(runtime.barrier().has_value(), "barrier");
  }
}

// Every other rank streams to rank 0 at once (many writers into one receiver's memory);
// rank 0 takes from its channels in turn and checks every message.
void fan_in(Runtime& runtime) {
  std::uint64_t count = count_or(20000);
  ChannelShape shape{.peer = 0, .tag = 27, .slot_bytes = 512, .slots = 8};
  if (runtime.rank() != 0) {
    SendChannel out = connected_send(runtime, shape);
    send_stream(out, static_cast<int>(runtime.rank()), count);
    return;
  }
  std::vector<ReceiveChannel> ins;
  for (int peer = 1; peer < runtime.size(); ++peer) {
    shape.peer = peer;
    ins.push_back(make_receive(runtime, shape));
  }
  std::vector<ReceiveChannel*> list;
  for (auto& in : ins) list.push_back(&in);
  auto connected = tether::wait_connected({}, list);
  CHECK(connected.has_value(), "{}", connected ? "" : connected.error().message());
  std::vector<std::uint64_t> next(ins.size(), 0);
  std::uint64_t bad = 0, done = 0;
  while (done < ins.size() * count) {
    bool any = false;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      Bytes message;
      if (next[i] == count || ins[i].test(message) != Status::done) continue;
      any = true;
      std::uint64_t sequence = next[i]++;
      std::size_t bytes = sequence % 7 == 0 ? shape.slot_bytes : (sequence * 37) % (shape.slot_bytes + 1);
      bad += message.size() == bytes && matches(message, i + 1, sequence) ? 0 : 1;
      CHECK(ins[i].release() == Status::done, "{}", ins[i].last_error().message());
      ++done;
    }
    if (!any) std::this_thread::yield();
  }
  CHECK(bad == 0, "{} of {} messages differ", bad, done);
  fmt::print("rank 0: {} messages from {} writers checked\n", done, ins.size());
}

// Rank 0, once rank 1 died: both its channels with rank 1 fail (the receive's wait with
// peer_unreachable, the send's start). The line the tests look for is printed only when
// every check of this rank passed: the job fails anyway, by rank 1's death.
[[noreturn]] void end_as_survivor_of_rank_1(ReceiveChannel& in, SendChannel& out) {
  Bytes message;
  Status status = in.wait(message);
  CHECK(status == Status::error && in.last_error().code == tether::Errc::peer_unreachable, "receive: status {} {}",
        static_cast<int>(status), in.last_error().message());
  status = start_when_possible(out, 8);  // (its code may be a failed write's)
  CHECK(status == Status::error, "send: status {} {}", static_cast<int>(status), out.last_error().message());
  if (tether::testing::rank_checks_passed()) fmt::print("rank 0 saw its channel fail: {}\n", in.last_error().message());
  std::fflush(nullptr);
  ::_exit(tether::testing::rank_checks_passed() ? 0 : 1);  // skip the barrier
}

// Rank 1 is killed (SIGKILL) after the two ranks exchanged one message, with rank 0's mapping
// of it live.
void killed(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 29, .slot_bytes = 4096, .slots = 2};
  ReceiveChannel in = make_receive(runtime, shape);
  SendChannel out = make_send(runtime, shape);
  connect(out, in);
  fill(out.buffer(), static_cast<std::uint64_t>(runtime.rank()), 0);
  CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "{}", out.last_error().message());
  Bytes message;
  if (runtime.rank() == 1) {
    // Only after rank 0's message has landed here: rank 0's send must not race the kill.
    CHECK(in.wait(message) == Status::done && matches(message, 0, 0), "rank 0's message before the kill");
    ::kill(::getpid(), SIGKILL);
  }
  CHECK(in.wait(message) == Status::done && matches(message, 1, 0), "the message before the kill");
  CHECK(in.release() == Status::done, "release");
  end_as_survivor_of_rank_1(in, out);
}

// Rank 1 dies after connecting; rank 0's channels fail with peer_unreachable.
void peer_death(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 23, .slot_bytes = 64, .slots = 2};
  ReceiveChannel in = make_receive(runtime, shape);
  SendChannel out = make_send(runtime, shape);
  connect(out, in);
  if (runtime.rank() == 1) {
    std::fflush(nullptr);
    ::_exit(3);
  }
  end_as_survivor_of_rank_1(in, out);
}

// Message `i` of rank 0's stream, filling the whole slot, started once its buffer is free.
void start_whole_message(SendChannel& out, std::uint64_t i) {
  std::span<std::byte> buffer;
  while (out.next_buffer(buffer) == Status::retry) {
  }
  fill(buffer.first(out.shape().slot_bytes), 0, i);
  CHECK(start_when_possible(out, out.shape().slot_bytes) != Status::error, "start {}: {}", i,
        out.last_error().message());
}

// Run with TETHER_INJECT_CREDIT_FAILURE=1 and TETHER_INJECT_WRITE_FAILURE_AT=completion
// where credits are messages: rank 1's first credit message fails at its completion and is
// owed again. Rank 0 streams 8 messages through 2 slots; rank 1 releases the first 6, then
// holds message 6 while it waits for 7, which needs every credit of the 6: a credit lost
// for good would leave both waiting until tether-run's timeout.
void credit_owed_again(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 44, .slot_bytes = 4096, .slots = 2};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    for (std::uint64_t i = 0; i < 8; ++i) start_whole_message(out, i);
    CHECK(out.wait() == Status::done, "the stream: {}", out.last_error().message());
    return;
  }
  ReceiveChannel in = connected_receive(runtime, shape);
  for (std::uint64_t i = 0; i < 8; ++i) {
    Bytes message;
    CHECK(in.wait(message) == Status::done && matches(message, 0, i), "message {}: {}", i, in.last_error().message());
    if (i < 6) CHECK(in.release() == Status::done, "release {}", i);
  }
  CHECK(in.release() == Status::done && in.release() == Status::done, "release 6 and 7");
}

// Where TETHER_INJECT_WRITE_FAILURE_AT puts an injected failure: its post (or completion).
bool injected_at_post() {
  return tether::config::Config::global().choice("TETHER_INJECT_WRITE_FAILURE_AT") == "post";
}

// After a channel failed: one message each way between the two ranks, checksummed.
void exchange_after_failure(Runtime& runtime, int peer) {
  std::vector<std::byte> mine(10000), theirs(10000);
  fill(mine, static_cast<std::uint64_t>(runtime.rank()), 7);
  tether::Request send, receive;
  CHECK(runtime.irecv(theirs.data(), theirs.size(), peer, 6, receive) != Status::error, "irecv");
  CHECK(runtime.isend(mine.data(), mine.size(), peer, 6, send) != Status::error, "isend");
  CHECK(runtime.wait(send) == Status::done && runtime.wait(receive) == Status::done, "the exchange after");
  CHECK(matches(theirs, static_cast<std::uint64_t>(peer), 7), "the message after the failure");
}

// After a channel failed or closed: a new pair of `shape` each way carries one message
// (filled with `seed`), checksummed.
void exchange_on_new_channels(Runtime& runtime, const ChannelShape& shape, std::uint64_t seed) {
  ReceiveChannel in = make_receive(runtime, shape);
  SendChannel out = make_send(runtime, shape);
  connect(out, in);
  fill(out.buffer().first(shape.slot_bytes), static_cast<std::uint64_t>(runtime.rank()), seed);
  CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "a new channel: {}", out.last_error().message());
  Bytes message;
  CHECK(in.wait(message) == Status::done && matches(message, static_cast<std::uint64_t>(shape.peer), seed),
        "a new channel's message: {}", in.last_error().message());
  CHECK(in.release() == Status::done && out.wait() == Status::done, "the new channels");
}

// Rank 0's side: messages 0, 1, ... filling whole slots, each started and waited for, until
// one fails or `most` have gone. The last status.
Status stream_until_failed(SendChannel& out, std::uint64_t most) {
  Status status = Status::done;
  for (std::uint64_t i = 0; i < most && status != Status::error; ++i) {
    fill(out.buffer().first(out.shape().slot_bytes), 0, i);
    status = start_when_possible(out, out.shape().slot_bytes);
    if (status != Status::error) status = out.wait();
  }
  return status;
}

// Rank 0's messages 0 and 1, whole slots (checksums), released; then the next wait must fail
// with `code` and a message containing `cause`.
void take_two_then_fail(ReceiveChannel& in, tether::Errc code, std::string_view cause) {
  for (std::uint64_t i = 0; i < 2; ++i) {
    Bytes message;
    CHECK(in.wait(message) == Status::done && message.size() == in.shape().slot_bytes && matches(message, 0, i),
          "message {} (landed before the failure): {}", i, in.last_error().message());
    CHECK(in.release() == Status::done, "release {}", i);
  }
  Bytes message;
  Status status = in.wait(message);
  CHECK(status == Status::error && in.last_error().code == code &&
            in.last_error().message().find(cause) != std::string::npos,
        "status {}: {}", static_cast<int>(status), in.last_error().message());
}

// Run with TETHER_INJECT_CHANNEL_WRITE_FAILURE=3 (and _AT=post or completion) on a
// transport whose channel messages are posted (not shm-own's direct stores): rank 0's
// third message fails, at start() or at wait(). Rank 1 waits only afterwards: it must still
// get the two messages that landed, then see its channel fail with rank 0's code instead of
// waiting for ever (rank 0 is alive and answers probes). Then both ranks still exchange
// messages and a new pair of channels, checksummed.
void write_failure(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 37, .slot_bytes = 4096, .slots = 4};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    const bool at_post = injected_at_post();
    for (std::uint64_t i = 0; i < 3; ++i) {  // no wait in between: the failure meets writes in flight
      std::span<std::byte> buffer;
      while (out.next_buffer(buffer) == Status::retry) {
      }
      fill(buffer.first(shape.slot_bytes), 0, i);
      Status status = start_when_possible(out, shape.slot_bytes);
      bool fails_here = i == 2 && at_post;
      CHECK(fails_here ? status == Status::error : status != Status::error, "start {} ({}): status {} {}", i,
            at_post ? "post" : "completion", static_cast<int>(status), out.last_error().message());
    }
    Status status = out.wait();
    bool injected = out.last_error().message().find("TETHER_INJECT_CHANNEL_WRITE_FAILURE") != std::string::npos;
    CHECK(status == Status::error && out.last_error().code == tether::Errc::transport && injected,
          "the injected failure: status {} {}", static_cast<int>(status), out.last_error().message());
    hand_token(runtime, 0, peer);
  } else {
    ReceiveChannel in = make_receive(runtime, shape);  // it may have failed before a wait_connected
    hand_token(runtime, 0, peer);
    take_two_then_fail(in, tether::Errc::transport, "rank 0's side of it failed");
    fmt::print("rank 1 saw its channel fail: {}\n", in.last_error().message());
  }
  exchange_after_failure(runtime, peer);
  exchange_on_new_channels(runtime, ChannelShape{.peer = peer, .tag = 38, .slot_bytes = 4096, .slots = 2}, 8);
}

// Run with TETHER_INJECT_CHANNEL_WRITE_FAILURE=3, TETHER_INJECT_WRITE_FAILURE_AT=after-close
// and a short TETHER_CHANNEL_CLOSE_TIMEOUT where channel messages are posted: rank 0 starts
// 3 messages from its own buffer and closes its channel while the third is in flight;
// close() gives up waiting and tells rank 1 it closed after 3, and only then does the third
// write fail. Rank 1 must take messages 0 and 1, then see its channel fail with rank 0's
// code instead of waiting for message 2 for ever on a live peer. Rank 0's buffer stays
// registered until that write ended. Then both still exchange messages, checksummed.
void write_failure_after_close(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 45, .slot_bytes = 4096, .slots = 4};
  if (runtime.rank() == 0) {
    std::vector<std::byte> memory(shape.slot_bytes);
    {
      auto out = SendChannel::create(runtime, shape, memory);
      CHECK(out && out->wait_connected().has_value(), "a channel from a user buffer");
      for (std::uint64_t i = 0; i < 3; ++i) {
        fill(memory, 0, i);  // the last write is done: start_when_possible waits for it
        CHECK(start_when_possible(*out, shape.slot_bytes) != Status::error, "start {}: {}", i,
              out->last_error().message());
      }
    }  // closed with the third write in flight; it fails once this rank progresses again
    CHECK(tether::channel_stats(runtime).user_registrations_held == 1, "the buffer, held while its write is in flight");
    hand_token(runtime, 1, peer);
    CHECK(tether::channel_stats(runtime).user_registrations_held == 0, "the buffer, held after its write ended");
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    take_two_then_fail(in, tether::Errc::transport, "rank 0's side of it failed");
    fmt::print("rank 1 saw its channel fail: {}\n", in.last_error().message());
    hand_token(runtime, 1, peer);
  }
  exchange_after_failure(runtime, peer);
}

// A channel closed before it connected still tells its peer: rank 0 closes a send channel
// it never connected, rank 1 then creates and connects the matching receive, whose wait()
// must fail with peer_closed; rank 1 likewise closes an unconnected receive channel, and
// rank 0's starts on the matching send must end with peer_closed. Before, both waited.
void close_unconnected(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape first{.peer = peer, .tag = 310, .slot_bytes = 64, .slots = 2};
  ChannelShape second{.peer = peer, .tag = 311, .slot_bytes = 64, .slots = 2};
  if (runtime.rank() == 0) {
    { SendChannel never_connected = make_send(runtime, first); }
    SendChannel out = connected_send(runtime, second);
    Status status = Status::posted;
    for (int started = 0; started < 100 && status != Status::error; ++started) {
      status = start_when_possible(out, 8);
      if (status != Status::error) CHECK(out.wait() != Status::error, "{}", out.last_error().message());
    }
    CHECK(status == Status::error && out.last_error().code == tether::Errc::peer_closed,
          "rank 1 closed its side before connecting, yet start() went on: {}", out.last_error().message());
  } else {
    ReceiveChannel in = connected_receive(runtime, first);
    Bytes message;
    CHECK(in.wait(message) == Status::error && in.last_error().code == tether::Errc::peer_closed,
          "the wait after rank 0 closed its unconnected side: {}", in.last_error().message());
    { ReceiveChannel never_connected = make_receive(runtime, second); }
  }
  hand_token(runtime, 1, peer);
}

// Rank 0 creates a channel (tag 304) and lets its connect deadline pass (1.5 s); only then,
// 0.3 s after telling it, does rank 1 create its side. wait_connected() still connects: it
// gives the handshake the whole timeout from its call.
void connect_after_the_deadline(Runtime& runtime) {
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 304, .slot_bytes = 64, .slots = 2};
  if (runtime.rank() == 0) {
    SendChannel late = make_send(runtime, shape);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    hand_token(runtime, 0, peer);
    auto connected = late.wait_connected();
    CHECK(connected.has_value(), "wait_connected after the deadline: {}", connected ? "" : connected.error().message());
    fill(late.buffer().first(64), 0, 9);
    CHECK(start_when_possible(late, 64) != Status::error && late.wait() == Status::done, "{}",
          late.last_error().message());
  } else {
    hand_token(runtime, 0, peer);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the last look of a late handshake
    ReceiveChannel in = connected_receive(runtime, shape);
    Bytes message;
    CHECK(in.wait(message) == Status::done && matches(message, 0, 9), "the message of tag 304");
    CHECK(in.release() == Status::done, "{}", in.last_error().message());
  }
  hand_token(runtime, 1, peer);
}

// Run with TETHER_CHANNEL_CONNECT_TIMEOUT=1s: rank 0 opens channels with tags 300 and 301
// to rank 1, which creates only the receive of tag 300. Waiting for both (and for 301
// alone) times out naming tag 301 instead of waiting for ever, and so does a start() on
// 301; rank 1's wait() on a receive of tag 302, which rank 0 never creates, times out too.
// start_all and wait_all given no entry for their one channel fail and do nothing. Then the
// connected pair still works.
void connect_timeout(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 300, .slot_bytes = 64, .slots = 2};
  if (runtime.rank() == 0) {
    SendChannel answered = make_send(runtime, shape);
    SendChannel unanswered = make_send(runtime, {.peer = peer, .tag = 301, .slot_bytes = 64, .slots = 2});
    std::vector<SendChannel*> both{&answered, &unanswered};
    auto connected = tether::wait_connected(both, {});
    CHECK(!connected && connected.error().code == tether::Errc::timeout &&
              connected.error().message().find("(tag 301)") != std::string::npos,
          "waiting for both channels: {}", connected ? "connected" : connected.error().message());
    auto alone = unanswered.wait_connected();
    CHECK(!alone && alone.error().code == tether::Errc::timeout, "waiting for tag 301 alone did not time out");
    CHECK(start_when_possible(unanswered, 64) == Status::error && unanswered.last_error().code == tether::Errc::timeout,
          "start() on tag 301: {}", unanswered.last_error().message());
    std::vector<SendChannel*> one{&answered};
    CHECK(tether::start_all(one, std::span<const std::size_t>{}) == Status::error, "start_all with no length");
    fill(answered.buffer().first(64), 0, 7);
    CHECK(start_when_possible(answered, 64) != Status::error, "{}", answered.last_error().message());
    CHECK(answered.wait() == Status::done, "{}", answered.last_error().message());
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    std::vector<ReceiveChannel*> one{&in};
    CHECK(tether::wait_all(one, std::span<std::span<const std::byte>>{}) == Status::error, "wait_all with no place");
    Bytes message;
    ReceiveChannel unanswered = make_receive(runtime, {.peer = peer, .tag = 302, .slot_bytes = 64, .slots = 2});
    CHECK(unanswered.wait(message) == Status::error && unanswered.last_error().code == tether::Errc::timeout &&
              unanswered.last_error().message().find("no matching send channel (tag 302)") != std::string::npos,
          "the wait on tag 302: {}", unanswered.last_error().message());
    CHECK(in.wait(message) == Status::done && matches(message, 0, 7), "the message after the refusals");
    CHECK(in.release() == Status::done, "{}", in.last_error().message());
  }
  hand_token(runtime, 1, peer);
  connect_after_the_deadline(runtime);
}

// Run with TETHER_INJECT_CORRUPT_FLAG=3 on shm-own: rank 0's third direct store writes a
// flag line naming a slot past the channel's last. Rank 1 must take the two messages before
// it, then refuse that flag (its channel fails naming it) and tell rank 0, whose next
// start() or wait() fails naming rank 1 instead of streaming into a dead channel. Then both
// still exchange messages and a new pair of channels, checksummed.
void corrupt_flag(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 43, .slot_bytes = 4096, .slots = 4};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    // Until told; tether-run's --timeout bounds it.
    (void)stream_until_failed(out, std::numeric_limits<std::uint64_t>::max());
    CHECK(out.last_error().code == tether::Errc::invalid_argument &&
              out.last_error().message().find("rank 1's side of it failed") != std::string::npos,
          "the sender: {}", out.last_error().message());
    fmt::print("rank 0 saw its channel fail: {}\n", out.last_error().message());
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    take_two_then_fail(in, tether::Errc::invalid_argument, "slot beyond the channel's slots");
    fmt::print("rank 1 refused the flag: {}\n", in.last_error().message());
  }
  exchange_after_failure(runtime, peer);
  exchange_on_new_channels(runtime, ChannelShape{.peer = peer, .tag = 44, .slot_bytes = 4096, .slots = 2}, 9);
}

// Run with TETHER_INJECT_CORRUPT_CREDIT=2 on shm-own: from its second on, rank 1's
// credit-word stores count 2^20 more messages released than rank 0 ever started. Rank 0 must refuse the word
// when it next reads it (out of credit), fail naming it and tell rank 1, whose channel then
// fails too instead of taking slots rank 0 would overwrite. Then both still exchange a
// message, checksummed.
void corrupt_credit(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 46, .slot_bytes = 4096, .slots = 4};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    (void)stream_until_failed(out, std::numeric_limits<std::uint64_t>::max());  // tether-run's --timeout bounds it
    CHECK(out.last_error().code == tether::Errc::invalid_argument &&
              out.last_error().message().find("credit word says") != std::string::npos,
          "the sender: {}", out.last_error().message());
    fmt::print("rank 0 refused the credit word: {}\n", out.last_error().message());
  } else {
    ReceiveChannel in = connected_receive(runtime, shape);
    Status status = Status::done;
    for (std::uint64_t i = 0; status != Status::error; ++i) {
      Bytes message;
      status = in.wait(message);
      if (status == Status::error) break;
      CHECK(message.size() == shape.slot_bytes && matches(message, 0, i), "message {} differs", i);
      CHECK(in.release() == Status::done, "release {}", i);
    }
    CHECK(in.last_error().code == tether::Errc::invalid_argument &&
              in.last_error().message().find("rank 0's side of it failed") != std::string::npos,
          "the receiver: {}", in.last_error().message());
    fmt::print("rank 1 saw its channel fail: {}\n", in.last_error().message());
  }
  exchange_after_failure(runtime, peer);
}

// Run with TETHER_INJECT_CREDIT_FAILURE=1 where credits are messages or writes (not
// shm-own's direct stores): rank 0 streams to rank 1 through 2 slots, and rank 1's first
// credit fails at its post (or, a credit write, at its completion). Rank 1's channel fails;
// rank 0, told, must fail at a start() or wait() (it would wait for the credit for ever)
// naming rank 1. Then both still exchange a message, checksummed. At completion the failure
// shows a progress pass late, so rank 1 may take up to 3 messages: the credit of a second
// release may let message 2 land first.
void credit_failure(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  ChannelShape shape{.peer = peer, .tag = 39, .slot_bytes = 4096, .slots = 2};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    Status status = stream_until_failed(out, 6);
    CHECK(status == Status::error && out.last_error().code == tether::Errc::transport &&
              out.last_error().message().find("rank 1's side of it failed") != std::string::npos,
          "the sender: status {} {}", static_cast<int>(status), out.last_error().message());
    fmt::print("rank 0 saw its channel fail: {}\n", out.last_error().message());
  } else {
    ReceiveChannel in = make_receive(runtime, shape);
    std::uint64_t taken = 0;
    Bytes message;
    Status status = Status::done;
    for (; taken < 6 && (status = in.wait(message)) == Status::done; ++taken) {
      CHECK(matches(message, 0, taken), "message {}", taken);
      CHECK(in.release() == Status::done, "release {}", taken);
    }
    const bool at_post = injected_at_post();
    CHECK(taken >= 1 && taken <= (at_post ? 2U : 3U) && status == Status::error &&
              in.last_error().message().find("TETHER_INJECT_CREDIT_FAILURE") != std::string::npos,
          "the receiver took {} messages, then status {} {}", taken, static_cast<int>(status),
          in.last_error().message());
  }
  exchange_after_failure(runtime, peer);
}

// Rank 0 starts 3 messages and closes its send channel; only then does rank 1 wait: it must
// get the 3 (checksums), then fail with peer_closed naming rank 0 instead of waiting for ever.
void send_side_closes(Runtime& runtime, int peer) {
  ChannelShape shape{.peer = peer, .tag = 41, .slot_bytes = 4096, .slots = 4};
  if (runtime.rank() == 0) {
    {
      SendChannel out = connected_send(runtime, shape);
      for (std::uint64_t i = 0; i < 3; ++i) start_whole_message(out, i);
    }
    return hand_token(runtime, 0, peer);
  }
  ReceiveChannel in = make_receive(runtime, shape);
  hand_token(runtime, 0, peer);
  Bytes message;
  for (std::uint64_t i = 0; i < 3; ++i) {
    CHECK(in.wait(message) == Status::done && matches(message, 0, i), "message {}: {}", i, in.last_error().message());
    CHECK(in.release() == Status::done, "release {}", i);
  }
  Status status = in.wait(message);
  CHECK(status == Status::error && in.last_error().code == tether::Errc::peer_closed &&
            in.last_error().message().find("rank 0 closed its send side (messages it started: 3,") !=
                std::string::npos,
        "after the 3 messages: status {} {}", static_cast<int>(status), in.last_error().message());
  fmt::print("rank 1 saw its channel closed: {}\n", in.last_error().message());
}

// Rank 1 receives into its own memory and closes its channel while rank 0, connected with
// credit for both slots, computes without calling the runtime (it has not heard of the
// close yet); rank 1 then reuses the memory. Rank 0's next start() must not land there:
// rank 1's close gives the memory back only once rank 0 acknowledged (after its last write).
void close_user_slots(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 26, .slot_bytes = 4096, .slots = 2};
  constexpr auto kReuse = std::byte{0x5A};
  if (runtime.rank() == 1) {
    std::vector<std::byte> memory(shape.slot_bytes * shape.slots);
    {
      auto in = ReceiveChannel::create(runtime, shape, memory);
      CHECK(in.has_value() && in->wait_connected().has_value(), "create with user memory");
      hand_token(runtime, 0, shape.peer);
    }  // closed
    std::fill(memory.begin(), memory.end(), kReuse);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    auto changed = std::count_if(memory.begin(), memory.end(), [&](std::byte b) { return b != kReuse; });
    CHECK(changed == 0, "{} bytes of the memory given back at close were written after it", changed);
    return;
  }
  SendChannel out = connected_send(runtime, shape);
  hand_token(runtime, 0, shape.peer);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  fill(out.buffer(), 0, 0);
  Status started = out.start(shape.slot_bytes);
  CHECK(started != Status::error || out.last_error().code == tether::Errc::peer_closed, "start: {}",
        out.last_error().message());
  if (started != Status::error) (void)out.wait();  // done, or peer_closed once the notice is in
}

// Rank 1 falls silent (sleeps, calls nothing) once it sent rank 0 a token; rank 0 starts a
// message from each of its buffers and asks next_buffer() for one until a write's
// acknowledgement comes (tcp-own: from rank 1's poll). Run with TETHER_PEER_TIMEOUT=1s: the retry loop must end with
// peer_unreachable, where nothing watched the peer and it retried for ever.
void silent_peer_buffer(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 27, .slot_bytes = 4096, .slots = 2};
  if (runtime.rank() == 1) {
    ReceiveChannel in = connected_receive(runtime, shape);
    hand_token(runtime, 1, shape.peer);  // its last progress: rank 0 writes only after this token
    std::this_thread::sleep_for(std::chrono::seconds(4));
    return;  // rank 0 counts this rank as gone: no closing barrier
  }
  SendChannel out = connected_send(runtime, shape);
  hand_token(runtime, 1, shape.peer);
  for (std::uint64_t i = 0; i < shape.slots; ++i) {  // every buffer (one per slot) holds a write in flight
    fill(out.buffer(), 0, i);
    CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "{}", out.last_error().message());
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::span<std::byte> buffer;
  Status status = Status::retry;
  while ((status = out.next_buffer(buffer)) == Status::retry && std::chrono::steady_clock::now() < deadline) {
  }
  CHECK(status == Status::error && out.last_error().code == tether::Errc::peer_unreachable,
        "next_buffer() with the peer silent for 3 s: status {} {}", static_cast<int>(status),
        out.last_error().message());
}

// Rank 1 takes message 0, hands rank 0 a token and computes for a second (calls nothing);
// rank 0 then starts message 1, whose write rank 1 cannot answer yet (tcp-own: from its
// poll), and wait_buffer() must give another buffer at once: the write still in flight
// (test() posted) proves it did not wait for it. Both messages land intact.
void buffer_while_peer_computes(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  ChannelShape shape{.peer = 1 - runtime.rank(), .tag = 28, .slot_bytes = 65536, .slots = 3};
  if (runtime.rank() == 1) {
    ReceiveChannel in = connected_receive(runtime, shape);
    for (std::uint64_t i = 0; i < 2; ++i) {
      Bytes message;
      CHECK(in.wait(message) == Status::done && matches(message, 0, i), "message {}: {}", i,
            in.last_error().message());
      CHECK(in.release() == Status::done, "release {}: {}", i, in.last_error().message());
      if (i == 0) {
        hand_token(runtime, 1, shape.peer);
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    return;
  }
  SendChannel out = connected_send(runtime, shape);
  std::byte* first = nullptr;
  for (std::uint64_t i = 0; i < 2; ++i) {
    std::span<std::byte> buffer;
    CHECK(out.wait_buffer(buffer) == Status::done, "wait_buffer {}: {}", i, out.last_error().message());
    if (i == 1) hand_token(runtime, 1, shape.peer);  // rank 1 took message 0 and computes
    fill(buffer, 0, i);
    if (i == 1) first = buffer.data();
    CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "start {}: {}", i, out.last_error().message());
    if (i == 0) CHECK(out.wait() == Status::done, "message 0: {}", out.last_error().message());
  }
  std::span<std::byte> next;
  CHECK(out.wait_buffer(next) == Status::done && next.data() != first, "wait_buffer with message 1 in flight: {}",
        out.last_error().message());
  CHECK(out.test() == Status::posted, "message 1's write finished while rank 1 computed: wait_buffer waited for it");
  CHECK(out.wait() == Status::done, "message 1: {}", out.last_error().message());
}

// Rank 1 already waits for a second message of a partitioned channel when rank 0 starts it,
// readies one of its two partitions and closes: rank 1's wait must fail with peer_closed
// counting 1 message (the half-ready one never lands whole).
void sender_closes_while_waited_on(Runtime& runtime, int peer) {
  ChannelShape shape{.peer = peer, .tag = 43, .slot_bytes = 8192, .slots = 4, .partitions = 2};
  if (runtime.rank() == 0) {
    SendChannel out = connected_send(runtime, shape);
    for (std::uint64_t i = 0; i < 2; ++i) {
      if (i == 1) {
        hand_token(runtime, 1, peer);  // rank 1 took message 0 and waits again
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      fill(out.buffer().first(shape.slot_bytes), 0, i);
      CHECK(start_when_possible(out, shape.slot_bytes) != Status::error, "start {}: {}", i,
            out.last_error().message());
      for (std::uint32_t p = 0; p < (i == 0 ? 2U : 1U); ++p)
        while (out.ready(p) == Status::retry) {
        }
      if (i == 0) CHECK(out.wait() == Status::done, "message 0: {}", out.last_error().message());
    }
    return;  // closed with message 1 half ready
  }
  ReceiveChannel in = connected_receive(runtime, shape);
  Bytes message;
  CHECK(in.wait(message) == Status::done && matches(message, 0, 0), "message 0: {}", in.last_error().message());
  CHECK(in.release() == Status::done, "release");
  hand_token(runtime, 1, peer);
  // A loop polling the partition that never comes ends once the close notice is in.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool ended = false;
  while (!(ended = in.arrived(1)) && std::chrono::steady_clock::now() < deadline) {
  }
  CHECK(ended, "arrived(1) stayed false for 5 s after the sender closed");
  Status status = in.wait(message);
  CHECK(status == Status::error && in.last_error().code == tether::Errc::peer_closed &&
            in.last_error().message().find("rank 0 closed its send side (messages it started: 1,") != std::string::npos,
        "waiting for message 1: status {} {}", static_cast<int>(status), in.last_error().message());
}

// Rank 0 starts 2 messages; rank 1 takes one, keeps it (no credit goes back) and, once rank
// 0's token says both were started, closes its receive channel (earlier, the notice could
// beat rank 0's second start). Rank 0, out of credits, must fail its next start() with
// peer_closed naming rank 1 once the close notice comes, where it would have waited for ever.
void receive_side_closes(Runtime& runtime, int peer) {
  ChannelShape shape{.peer = peer, .tag = 42, .slot_bytes = 4096, .slots = 2};
  if (runtime.rank() == 1) {
    ReceiveChannel in = connected_receive(runtime, shape);
    Bytes message;
    CHECK(in.wait(message) == Status::done && matches(message, 0, 0), "message 0: {}", in.last_error().message());
    hand_token(runtime, 0, peer);
    return;  // closed holding message 0, message 1 not taken
  }
  SendChannel out = connected_send(runtime, shape);
  for (std::uint64_t i = 0; i < 2; ++i) start_whole_message(out, i);
  CHECK(out.wait() == Status::done, "the 2 writes: {}", out.last_error().message());
  hand_token(runtime, 0, peer);
  Status status = start_when_possible(out, shape.slot_bytes);
  CHECK(status == Status::error && out.last_error().code == tether::Errc::peer_closed &&
            out.last_error().message().find("rank 1 closed its receive side (messages it took: 1)") !=
                std::string::npos,
        "a start after the close: status {} {}", static_cast<int>(status), out.last_error().message());
  fmt::print("rank 0 saw its channel closed: {}\n", out.last_error().message());
}

// A side that closes its channel tells the other, which fails with peer_closed once nothing
// more can come or be read, instead of waiting for ever on a live peer. Then both ranks still
// exchange a message, and a new pair of channels on the same tag carries one, checksummed.
void peer_closed(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  const int peer = 1 - runtime.rank();
  send_side_closes(runtime, peer);
  sender_closes_while_waited_on(runtime, peer);
  receive_side_closes(runtime, peer);
  exchange_after_failure(runtime, peer);
  exchange_on_new_channels(  // on the tag of a closed pair
      runtime, ChannelShape{.peer = peer, .tag = 41, .slot_bytes = 4096, .slots = 4}, 9);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string_view, std::function<void(Runtime&)>> scenarios = {
      {"integrity", integrity}, {"duplex", duplex}, {"reply-credits", reply_credits},
      {"lazy-acknowledgements", lazy_acknowledgements}, {"large", large},       {"slow-receiver", slow_receiver},
      {"credit-batch", credit_batch},
      {"split-sizes", split_sizes},
      {"partitioned", partitioned}, {"many", many},   {"no-overhead", no_overhead},
      {"user-buffers", user_buffers}, {"self", self}, {"mismatch", mismatch},
      {"bad-input", bad_input}, {"close-in-flight", close_in_flight}, {"fan-in", fan_in},
      {"killed", killed}, {"peer-death", peer_death}, {"write-failure", write_failure}, {"credit-failure", credit_failure},
      {"peer-closed", peer_closed}, {"silent-peer-buffer", silent_peer_buffer},
      {"buffer-while-peer-computes", buffer_while_peer_computes},
      {"close-user-slots", close_user_slots}, {"credit-owed-again", credit_owed_again}, {"corrupt-flag", corrupt_flag},
      {"write-failure-after-close", write_failure_after_close},
      {"connect-timeout", connect_timeout},
      {"close-unconnected", close_unconnected},
      {"corrupt-credit", corrupt_credit},
      {"held-slots", held_slots}, {"warm-slot", warm_slot},
      {"warm-large-slot", warm_large_slot}, {"send-buffers", send_buffers}, {"held-large-slots", held_large_slots},
      {"user-slots", user_slots}};
  auto found = argc >= 2 ? scenarios.find(argv[1]) : scenarios.end();
  if (found == scenarios.end()) {
    std::string names;
    for (const auto& [name, run] : scenarios) names += fmt::format(" {}", name);
    fmt::print(stderr, "usage: tether-persist-check SCENARIO [COUNT]; scenarios:{}\n", names);
    return 2;
  }
  if (argc >= 3) g_count = std::strtoull(argv[2], nullptr, 10);
  auto runtime = Runtime::start();
  if (!runtime) {
    fmt::print(stderr, "{}\n", runtime.error().message());
    return 1;
  }
  found->second(**runtime);
  if (found->first != "silent-peer-buffer") (void)(*runtime)->barrier();  // there a peer counts as gone
  if (tether::testing::rank_checks_passed()) fmt::print("rank {}: {} passed\n", (*runtime)->rank(), found->first);
  return tether::testing::rank_checks_passed() ? 0 : 1;
}
