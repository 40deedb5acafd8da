// tether-messaging-check SCENARIO: run by every rank of a job (tether-run or mpirun).
// Each scenario asserts on the bytes that landed, counts and error codes; exit 0 = pass.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/base/config.hpp"
#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/messaging/engine.hpp"
#include "tether/pool.hpp"
#include "tether/runtime.hpp"
#include "tests/support/mapped_library.hpp"
#include "tests/support/rank_check.hpp"
#include "tests/support/start_job.hpp"

namespace {

using tether::MessageInfo;
using tether::Request;
using tether::Runtime;
using tether::Status;

std::uint64_t fill(std::byte* data, std::size_t bytes, std::uint64_t seed) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    data[i] = static_cast<std::byte>((seed * 2654435761u + i * 31) >> 3);
    sum = sum * 131 + static_cast<std::uint64_t>(data[i]);
  }
  return sum;
}

std::uint64_t checksum(const std::byte* data, std::size_t bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) sum = sum * 131 + static_cast<std::uint64_t>(data[i]);
  return sum;
}

void wait_ok(Runtime& runtime, Request& request, MessageInfo* info = nullptr) {
  Status status = runtime.wait(request, info);
  CHECK(status == Status::done, "wait: {}", runtime.last_error().message());
}

// Ring exchange of every size, user (malloc) and pool buffers, checksummed.
void sizes(Runtime& runtime, bool pool_buffers) {
  int next = (runtime.rank() + 1) % runtime.size();
  int previous = (runtime.rank() + runtime.size() - 1) % runtime.size();
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{4096}, std::size_t{65536},
                            std::size_t{1} << 20, std::size_t{5} << 20, std::size_t{64} << 20}) {
    auto* out = static_cast<std::byte*>(pool_buffers ? tether::pinned_alloc(bytes + 1) : std::malloc(bytes + 1));
    auto* in = static_cast<std::byte*>(pool_buffers ? tether::pinned_alloc(bytes + 1) : std::malloc(bytes + 1));
    fill(out, bytes, static_cast<std::uint64_t>(runtime.rank()) + bytes);
    std::vector<std::byte> expected(bytes);
    std::uint64_t want = fill(expected.data(), bytes, static_cast<std::uint64_t>(previous) + bytes);
    Request receive, send;
    CHECK(runtime.irecv(in, bytes, previous, 7, receive) != Status::error, "{}", runtime.last_error().message());
    CHECK(runtime.isend(out, bytes, next, 7, send) != Status::error, "{}", runtime.last_error().message());
    MessageInfo info;
    wait_ok(runtime, receive, &info);
    wait_ok(runtime, send);
    CHECK(checksum(in, bytes) == want, "{} bytes from rank {}: checksum differs", bytes, previous);
    CHECK(info.source == previous && info.tag == 7 && info.bytes == bytes, "info {} {} {}", info.source, info.tag, info.bytes);
    if (pool_buffers) {
      tether::pinned_free(out);
      tether::pinned_free(in);
    } else {
      std::free(out);
      std::free(in);
    }
  }
  // TETHER_RNDV_PROTOCOL=split: every rendezvous receive read its second half itself; put
  // or get: none did (auto picks by transport and buffer).
  std::string_view chosen = tether::config::Config::global().choice("TETHER_RNDV_PROTOCOL");
  std::uint64_t rendezvous = runtime.engine().rendezvous_received();
  std::uint64_t split = runtime.engine().split_rendezvous_received();
  if (chosen == "split" && runtime.size() > 1)
    CHECK(split == rendezvous && rendezvous > 0, "{} of {} rendezvous receives split", split, rendezvous);
  if (chosen == "put" || chosen == "get") CHECK(split == 0, "{} split rendezvous receives with {}", split, chosen);
}

// Messages between a pair with the same tag arrive in send order, eager and rendezvous mixed.
void ordering(Runtime& runtime) {
  constexpr int kMessages = 200;
  if (runtime.rank() == 0) {
    std::vector<std::vector<std::uint32_t>> payloads;
    std::vector<Request> sends(kMessages);
    for (int i = 0; i < kMessages; ++i) {
      std::size_t words = i % 10 == 0 ? 40000 : 1 + i % 5;  // every tenth goes by rendezvous
      payloads.emplace_back(words, static_cast<std::uint32_t>(i));
      CHECK(runtime.isend(payloads.back().data(), words * 4, 1, 3, sends[i]) != Status::error, "send {}", i);
    }
    CHECK(runtime.wait_all(sends) == Status::done, "sends");
  } else if (runtime.rank() == 1) {
    std::vector<std::uint32_t> buffer(40000);
    for (int i = 0; i < kMessages; ++i) {
      Request receive;
      MessageInfo info;
      CHECK(runtime.irecv(buffer.data(), buffer.size() * 4, 0, 3, receive) != Status::error, "recv");
      wait_ok(runtime, receive, &info);
      CHECK(buffer[0] == static_cast<std::uint32_t>(i), "message {} arrived as {}", i, buffer[0]);
    }
  }
}

// Small sends the transport takes at once hold no request slot: rank 0 starts 40 of them
// under TETHER_MAX_REQUESTS=8 (the test sets it) before waiting any; each finishes with its
// size, a second wait is refused, and rank 1 receives them in order.
void sends_at_start(Runtime& runtime) {
  constexpr int kMessages = 40;
  if (runtime.rank() == 0) {
    std::vector<std::uint64_t> payloads(kMessages);
    std::vector<Request> sends(kMessages);
    for (int i = 0; i < kMessages; ++i) {
      payloads[i] = 1000 + static_cast<std::uint64_t>(i);
      CHECK(runtime.isend(&payloads[i], sizeof payloads[i], 1, 6, sends[i]) != Status::error, "send {}: {}", i,
            runtime.last_error().message());
    }
    std::vector<MessageInfo> infos(kMessages);
    CHECK(runtime.wait_all(sends, infos) == Status::done, "sends: {}", runtime.last_error().message());
    for (int i = 0; i < kMessages; ++i) CHECK(infos[i].bytes == sizeof(std::uint64_t), "send {}: {} bytes", i, infos[i].bytes);
    CHECK(runtime.wait(sends[0]) == Status::error, "a send waited twice was accepted");
    CHECK(runtime.last_error().message().find("not in flight") != std::string::npos, "{}", runtime.last_error().message());
  } else if (runtime.rank() == 1) {
    for (int i = 0; i < kMessages; ++i) {
      std::uint64_t value = 0;
      Request receive;
      CHECK(runtime.irecv(&value, sizeof value, 0, 6, receive) != Status::error, "recv {}", i);
      wait_ok(runtime, receive, nullptr);
      CHECK(value == 1000 + static_cast<std::uint64_t>(i), "message {} arrived as {}", i, value);
    }
  }
}

// shm-own hands an eager message that a posted receive matches over from its ring entry
// (one copy; `Engine::messages_read_in_place` counts). Receives posted before the sends
// take every message in place; messages that arrive before their receive take the
// general way (receive buffer, unexpected queue); a message behind one that was declined
// is declined too, so the pair's order holds. Every message lands whole, in order.
constexpr int kInPlaceTag = 7;

bool reads_in_place(Runtime& runtime) {
  return runtime.engine().transport().name().find("shm-own") != std::string_view::npos;
}

std::size_t in_place_bytes(int message) {
  constexpr std::size_t kBytes[] = {0, 1, 8, 100, 4096, 8192};
  return kBytes[static_cast<std::size_t>(message) % std::size(kBytes)];
}

// Rank 0 sends `count` messages after the first barrier; rank 1 posts its receives before
// it (posted_first) or after the second, when every message has arrived. The number of
// messages rank 1 read in place meanwhile: with posted_first that includes the barrier's
// one message (2 ranks), if it too met its receive.
std::uint64_t exchange_in_place(Runtime& runtime, int count, bool posted_first) {
  std::vector<std::vector<std::byte>> buffers(count, std::vector<std::byte>(8192));
  std::vector<Request> requests(count);
  auto post_receives = [&] {
    for (int i = 0; i < count; ++i)
      CHECK(runtime.irecv(buffers[i].data(), buffers[i].size(), 0, kInPlaceTag, requests[i]) != Status::error,
            "recv {}", i);
  };
  std::uint64_t before = runtime.engine().messages_read_in_place();
  if (runtime.rank() == 1 && posted_first) post_receives();
  CHECK(runtime.barrier().has_value(), "barrier");
  if (runtime.rank() == 0) {
    for (int i = 0; i < count; ++i) {
      (void)fill(buffers[i].data(), in_place_bytes(i), 500 + static_cast<std::uint64_t>(i));
      CHECK(runtime.isend(buffers[i].data(), in_place_bytes(i), 1, kInPlaceTag, requests[i]) != Status::error,
            "send {}", i);
    }
    CHECK(runtime.wait_all(requests) == Status::done, "sends: {}", runtime.last_error().message());
  }
  if (!posted_first) {
    CHECK(runtime.barrier().has_value(), "barrier");  // rank 0's messages come before its barrier message
    before = runtime.engine().messages_read_in_place();
    if (runtime.rank() == 1) post_receives();
  }
  if (runtime.rank() != 1) return 0;
  std::vector<MessageInfo> infos(count);
  CHECK(runtime.wait_all(requests, infos) == Status::done, "receives: {}", runtime.last_error().message());
  std::uint64_t in_place = runtime.engine().messages_read_in_place() - before;
  std::vector<std::byte> expected(8192);
  for (int i = 0; i < count; ++i) {
    std::uint64_t want = fill(expected.data(), in_place_bytes(i), 500 + static_cast<std::uint64_t>(i));
    CHECK(infos[i].received_bytes == in_place_bytes(i) && checksum(buffers[i].data(), in_place_bytes(i)) == want,
          "message {} ({} bytes) arrived as {} bytes or with other bytes", i, in_place_bytes(i),
          infos[i].received_bytes);
  }
  return in_place;
}

// Rank 0 sends tag A, then tag B; rank 1 has posted only B's receive. Taking B in place
// before A is delivered would break the pair's order: A would then count as a duplicate,
// be dropped, and its receive never finish. B may still be read in place once A went to
// the unexpected queue in an earlier poll.
void receive_behind_a_declined_message(Runtime& runtime) {
  std::uint64_t values[2] = {0, 0};
  Request requests[2];
  if (runtime.rank() == 1)
    CHECK(runtime.irecv(&values[1], sizeof values[1], 0, kInPlaceTag + 1, requests[1]) != Status::error, "recv B");
  CHECK(runtime.barrier().has_value(), "barrier");
  if (runtime.rank() == 0) {
    values[0] = 0xa;
    values[1] = 0xb;
    for (int i = 0; i < 2; ++i)
      CHECK(runtime.isend(&values[i], sizeof values[i], 1, kInPlaceTag + i, requests[i]) != Status::error, "send {}", i);
    CHECK(runtime.wait_all(requests) == Status::done, "sends: {}", runtime.last_error().message());
  }
  if (runtime.rank() != 1) return;
  wait_ok(runtime, requests[1]);
  CHECK(runtime.irecv(&values[0], sizeof values[0], 0, kInPlaceTag, requests[0]) != Status::error, "recv A");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status status = Status::posted;
  while (status == Status::posted && std::chrono::steady_clock::now() < deadline) status = runtime.test(requests[0]);
  CHECK(status == Status::done, "the message before B never finished its receive (dropped as out of order?)");
  CHECK(values[0] == 0xa && values[1] == 0xb, "A arrived as {:#x}, B as {:#x}", values[0], values[1]);
}

void read_in_place(Runtime& runtime) {
  // 24 messages, 20 of which spend an eager credit: fewer than half the 64 lent, so no
  // credit message is due (one would be declined: nothing in place may call the transport).
  constexpr int kMessages = 24;
  std::uint64_t posted_first = exchange_in_place(runtime, kMessages, true);
  std::uint64_t posted_after = exchange_in_place(runtime, kMessages, false);
  receive_behind_a_declined_message(runtime);
  if (runtime.rank() != 1) return;
  if (reads_in_place(runtime))
    CHECK(posted_first == kMessages || posted_first == kMessages + 1,
          "{} messages read in place where {} met posted receives (and maybe 1 of the barrier)", posted_first, kMessages);
  else
    CHECK(posted_first == 0, "{} messages read in place over {}", posted_first, runtime.engine().transport().name());
  CHECK(posted_after == 0, "{} messages that came before their receives were read in place", posted_after);
}

// A receive waited on that names its source and is the oldest posted one can only be
// finished by a message of that source: on shm-own the wait looks at that ring alone
// between whole progress passes (`messages_taken_waiting` counts what the looks took). Ranks 0 and 1 answer
// each other's messages; every message is checked.
void waited_in_place(Runtime& runtime) {
  if (runtime.rank() > 1) return;
  constexpr int kRounds = 2000;
  int peer = 1 - runtime.rank();
  std::uint64_t before = runtime.engine().messages_taken_waiting();
  int damaged = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::size_t bytes = in_place_bytes(round);
    std::vector<std::byte> out(bytes), in(8192);
    auto me = static_cast<std::uint64_t>(runtime.rank());
    (void)fill(out.data(), bytes, 1000 * me + static_cast<std::uint64_t>(round));
    Request send, receive;
    auto exchange_send = [&] {
      CHECK(runtime.isend(out.data(), bytes, peer, kInPlaceTag, send) != Status::error, "send {}", round);
      wait_ok(runtime, send);
    };
    if (runtime.rank() == 0) exchange_send();
    CHECK(runtime.irecv(in.data(), in.size(), peer, kInPlaceTag, receive) != Status::error, "recv {}", round);
    MessageInfo info;
    wait_ok(runtime, receive, &info);
    std::vector<std::byte> expected(bytes);
    auto want = fill(expected.data(), bytes, 1000 * (1 - me) + static_cast<std::uint64_t>(round));
    damaged += info.received_bytes != bytes || checksum(in.data(), bytes) != want;
    if (runtime.rank() == 1) exchange_send();
  }
  CHECK(damaged == 0, "{} of {} answers differ from what was sent", damaged, kRounds);
  std::uint64_t taken = runtime.engine().messages_taken_waiting() - before;
  if (reads_in_place(runtime))
    CHECK(taken >= kRounds / 2, "waits took {} of {} messages from their sender's ring", taken, kRounds);
  else
    CHECK(taken == 0, "{} messages taken waiting over {}", taken, runtime.engine().transport().name());
  fmt::print("rank {}: {} of {} messages taken by the waiting receive\n", runtime.rank(), taken, kRounds);
}

// Any-source and any-tag receives see every message exactly once.
void wildcards(Runtime& runtime) {
  if (runtime.rank() == 0) {
    std::map<int, int> seen;
    for (int i = 0; i < (runtime.size() - 1) * 3; ++i) {
      int value = -1;
      Request receive;
      MessageInfo info;
      CHECK(runtime.irecv(&value, sizeof value, tether::kAnySource, tether::kAnyTag, receive) != Status::error, "recv");
      wait_ok(runtime, receive, &info);
      CHECK(value == info.source * 100 + info.tag, "value {} from {} tag {}", value, info.source, info.tag);
      ++seen[info.source];
    }
    for (int rank = 1; rank < runtime.size(); ++rank) CHECK(seen[rank] == 3, "rank {} seen {} times", rank, seen[rank]);
  } else {
    for (int tag = 0; tag < 3; ++tag) {
      int value = runtime.rank() * 100 + tag;
      Request send;
      CHECK(runtime.isend(&value, sizeof value, 0, tag, send) != Status::error, "send");
      wait_ok(runtime, send);
    }
  }
}

// A message longer than its buffer: the buffer holds the first bytes, nothing beyond. Room
// for half of it, eager and rendezvous, and 100 bytes of a rendezvous message (a split
// rendezvous then has nothing for the sender to write: the receiver reads it all).
void truncation(Runtime& runtime) {
  for (auto [bytes, room] : {std::pair{std::size_t{100}, std::size_t{50}}, {std::size_t{1} << 20, std::size_t{1} << 19},
                             {std::size_t{1} << 20, std::size_t{100}}}) {
    if (runtime.rank() == 0) {
      std::vector<std::byte> out(bytes);
      fill(out.data(), bytes, 5);
      Request send;
      CHECK(runtime.isend(out.data(), bytes, 1, 9, send) != Status::error, "send");
      wait_ok(runtime, send);
    } else if (runtime.rank() == 1) {
      std::vector<std::byte> expected(bytes);
      fill(expected.data(), bytes, 5);
      std::vector<std::byte> in(bytes, std::byte{0xee});
      Request receive;
      MessageInfo info;
      CHECK(runtime.irecv(in.data(), room, 0, 9, receive) != Status::error, "recv");
      Status status = runtime.wait(receive, &info);
      CHECK(status == Status::error && info.error == tether::Errc::truncated, "status {}", static_cast<int>(status));
      CHECK(info.bytes == bytes && info.received_bytes == room, "bytes {} received {}", info.bytes, info.received_bytes);
      CHECK(std::memcmp(in.data(), expected.data(), room) == 0, "first bytes differ");
      CHECK(in[room] == std::byte{0xee}, "a byte past the posted size was written");
    }
  }
}

// Thousands of requests in flight at once between every pair.
void many(Runtime& runtime) {
  constexpr int kPerPeer = 2000;
  std::vector<Request> requests;
  std::vector<std::uint64_t> in(static_cast<std::size_t>(kPerPeer * runtime.size()));
  std::vector<std::uint64_t> out(in.size());
  for (int peer = 0; peer < runtime.size(); ++peer)
    for (int i = 0; i < kPerPeer; ++i) {
      std::size_t index = static_cast<std::size_t>(peer * kPerPeer + i);
      out[index] = static_cast<std::uint64_t>(runtime.rank()) << 32 | static_cast<std::uint64_t>(i);
      requests.emplace_back();
      CHECK(runtime.irecv(&in[index], 8, peer, i, requests.back()) != Status::error, "{}", runtime.last_error().message());
      requests.emplace_back();
      CHECK(runtime.isend(&out[index], 8, peer, i, requests.back()) != Status::error, "{}", runtime.last_error().message());
    }
  CHECK(runtime.wait_all(requests) == Status::done, "wait_all");
  for (int peer = 0; peer < runtime.size(); ++peer)
    for (int i = 0; i < kPerPeer; ++i)
      CHECK(in[static_cast<std::size_t>(peer * kPerPeer + i)] == (static_cast<std::uint64_t>(peer) << 32 | static_cast<std::uint64_t>(i)),
            "peer {} message {}", peer, i);
}

// Several application threads per rank at once, each exchanging with the other rank on
// its own tag: small (inline eager), bounce-buffer eager and rendezvous sizes, every
// message checksummed. Runs with and without TETHER_PROGRESS_THREAD.
void threads(Runtime& runtime) {
  CHECK(runtime.size() == 2, "threads runs on 2 ranks, not {}", runtime.size());
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  int peer = 1 - runtime.rank();
  std::atomic<int> failures{0};
  auto exchange = [&](int thread) {
    for (int round = 0; round < kRounds; ++round) {
      std::size_t bytes = round % 3 == 0 ? 8 : round % 3 == 1 ? 2048 : 100000;
      std::vector<std::byte> out(bytes), in(bytes), expected(bytes);
      std::uint64_t seed = static_cast<std::uint64_t>(thread * kRounds + round);
      fill(out.data(), bytes, seed * 2 + static_cast<std::uint64_t>(runtime.rank()));
      std::uint64_t wanted = fill(expected.data(), bytes, seed * 2 + static_cast<std::uint64_t>(peer));
      Request receive, send;
      MessageInfo info;
      if (runtime.irecv(in.data(), bytes, peer, 100 + thread, receive) == Status::error ||
          runtime.isend(out.data(), bytes, peer, 100 + thread, send) == Status::error ||
          runtime.wait(send) != Status::done || runtime.wait(receive, &info) != Status::done ||
          info.received_bytes != bytes || checksum(in.data(), bytes) != wanted) {
        failures.fetch_add(1);
        return;
      }
    }
  };
  std::vector<std::thread> workers;
  for (int thread = 0; thread < kThreads; ++thread) workers.emplace_back(exchange, thread);
  for (std::thread& worker : workers) worker.join();
  CHECK(failures.load() == 0, "{} of {} threads saw a failed or corrupted exchange: {}", failures.load(), kThreads,
        runtime.last_error().message());
}

// Bad arguments are refused with a clear error and nothing starts.
void bad_input(Runtime& runtime) {
  int value = 0;
  Request request;
  CHECK(runtime.isend(&value, 4, runtime.size(), 0, request) == Status::error, "unknown rank accepted");
  CHECK(runtime.last_error().message().find("job of") != std::string::npos, "{}", runtime.last_error().message());
  CHECK(runtime.isend(&value, 4, 0, -5, request) == Status::error, "negative tag accepted");
  CHECK(runtime.irecv(nullptr, 4, 0, 0, request) == Status::error, "null buffer accepted");
  CHECK(runtime.irecv(&value, 4, -7, 0, request) == Status::error, "rank -7 accepted");
  Request self;
  CHECK(runtime.isend(&value, 4, runtime.rank(), 1, self) != Status::error, "self send");
  int got = -1;
  Request receive;
  CHECK(runtime.irecv(&got, 4, runtime.rank(), 1, receive) != Status::error, "self recv");
  wait_ok(runtime, receive);
  wait_ok(runtime, self);
  CHECK(runtime.wait(receive) == Status::error, "a request waited twice was accepted");
  CHECK(runtime.last_error().message().find("not in flight") != std::string::npos, "{}", runtime.last_error().message());
}

// Rank 1 dies; the others' requests to it fail with peer_unreachable instead of hanging.
// Three ranks under pressure (run with a small TETHER_POOL_MAX and TETHER_EAGER_CREDITS):
// rank 2 floods rank 0 before any receive is posted, past its eager credits, so the first
// messages wait at rank 0 and the rest at rank 2 (rendezvous); rank 0 then takes the
// whole pool, so its eager send to rank 1 fails with a clear out-of-memory error while it
// still receives rank 2's queued messages; once the pool is given back, the send to rank 1
// and the rest of the flood go through. Every message is checksummed.
constexpr int kFlood = 64;
constexpr std::size_t kFloodBytes = 512;

struct Flood {
  std::vector<std::vector<std::byte>> out;
  std::vector<Request> sends;
};

Flood start_flood(Runtime& runtime) {
  Flood flood{std::vector<std::vector<std::byte>>(kFlood, std::vector<std::byte>(kFloodBytes)),
              std::vector<Request>(kFlood)};
  for (int i = 0; i < kFlood; ++i) {
    fill(flood.out[i].data(), kFloodBytes, 1000 + static_cast<std::uint64_t>(i));
    CHECK(runtime.isend(flood.out[i].data(), kFloodBytes, 0, 20 + i, flood.sends[i]) != Status::error, "{}",
          runtime.last_error().message());
  }
  return flood;
}

// Receives flood messages [first, last) in reverse: every match searches the queue.
void receive_flood(Runtime& runtime, int first, int last) {
  std::vector<std::byte> expected(kFloodBytes), in(kFloodBytes);
  int bad = 0;
  for (int i = last - 1; i >= first; --i) {
    Request request;
    CHECK(runtime.irecv(in.data(), kFloodBytes, 2, 20 + i, request) != Status::error, "{}", runtime.last_error().message());
    wait_ok(runtime, request);
    if (checksum(in.data(), kFloodBytes) != fill(expected.data(), kFloodBytes, 1000 + static_cast<std::uint64_t>(i))) ++bad;
  }
  CHECK(bad == 0, "{} of flooded messages {}-{} differ", bad, first, last - 1);
}

int eager_credits() {
  return static_cast<int>(std::min<std::int64_t>(kFlood, tether::config::Config::global().integer("TETHER_EAGER_CREDITS")));
}

std::vector<void*> take_the_pool() {
  std::vector<void*> hog;
  for (std::size_t bytes = std::size_t{1} << 20; bytes >= 16; bytes /= 2)  // every size class's free blocks too
    while (void* buffer = tether::pinned_alloc(bytes)) hog.push_back(buffer);
  return hog;
}

void serve_under_pressure(Runtime& runtime) {
  std::byte token[64];
  std::vector<void*> hog = take_the_pool();
  CHECK(!hog.empty(), "the pool gave nothing");
  fill(token, sizeof token, 77);
  // Larger than the eager messages that go inline (built on the stack): this one needs a
  // pinned bounce buffer.
  std::vector<std::byte> bounced(1024);
  Request refused;
  Status started = runtime.isend(bounced.data(), bounced.size(), 1, 8, refused);
  Status outcome = started == Status::error ? started : runtime.wait(refused);
  CHECK(outcome == Status::error && runtime.last_error().code == tether::Errc::out_of_memory,
        "an eager send with the pool exhausted: {}", runtime.last_error().message());
  // 32 B of header and 8 B fit every transport's inject size (64 B on tcp;ofi_rxm): inline,
  // no pinned memory needed.
  Request small;
  CHECK(runtime.isend(token, 8, 1, 9, small) != Status::error && runtime.wait(small) == Status::done,
        "an 8-byte send with the pool exhausted: {}", runtime.last_error().message());
  receive_flood(runtime, 0, eager_credits());  // queued here: the other peer is still served
  for (void* buffer : hog) tether::pinned_free(buffer);
  receive_flood(runtime, eager_credits(), kFlood);  // waited at the sender
  Request send;
  CHECK(runtime.isend(token, sizeof token, 1, 8, send) != Status::error, "{}", runtime.last_error().message());
  wait_ok(runtime, send);
}

void pressure(Runtime& runtime) {
  CHECK(runtime.size() == 3, "pressure runs on 3 ranks, not {}", runtime.size());
  Flood flood;
  if (runtime.rank() == 2) flood = start_flood(runtime);
  CHECK(runtime.barrier().has_value(), "barrier");
  if (runtime.rank() == 0) serve_under_pressure(runtime);
  if (runtime.rank() == 1) {
    std::byte in[64], expected[64];
    Request receive;
    CHECK(runtime.irecv(in, 8, 0, 9, receive) != Status::error, "{}", runtime.last_error().message());
    wait_ok(runtime, receive);
    fill(expected, sizeof expected, 77);
    CHECK(std::memcmp(in, expected, 8) == 0, "the send with the pool exhausted differs");
    std::memset(in, 0, sizeof in);
    CHECK(runtime.irecv(in, sizeof in, 0, 8, receive) != Status::error, "{}", runtime.last_error().message());
    wait_ok(runtime, receive);
    CHECK(checksum(in, sizeof in) == fill(expected, sizeof expected, 77), "the send after the pool came back differs");
  }
  if (runtime.rank() == 2) CHECK(runtime.wait_all(flood.sends) == Status::done, "flood: {}", runtime.last_error().message());
  CHECK(runtime.barrier().has_value(), "barrier");
}

// Rank 1 takes its whole pool before a rendezvous from rank 0 arrives: its CTS and FIN
// (get, split) come from the engine's control reserve, so the message lands and both
// requests finish, where they once failed the receive and left the send waiting for ever.
void exhausted_pool_rendezvous(Runtime& runtime) {
  CHECK(runtime.size() == 2, "exhausted-pool-rendezvous runs on 2 ranks, not {}", runtime.size());
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  constexpr int kMessages = 3;
  std::vector<std::byte> data(kBytes);
  std::vector<void*> hog;
  if (runtime.rank() == 1) hog = take_the_pool();
  CHECK(runtime.rank() == 0 || !hog.empty(), "the pool gave nothing");
  CHECK(runtime.barrier().has_value(), "barrier");
  for (int i = 0; i < kMessages; ++i) {
    Request request;
    std::uint64_t want = fill(data.data(), kBytes, 500 + static_cast<std::uint64_t>(i));
    Status started = runtime.rank() == 0 ? runtime.isend(data.data(), kBytes, 1, 30 + i, request)
                                         : runtime.irecv(data.data(), kBytes, 0, 30 + i, request);
    CHECK(started != Status::error, "{}", runtime.last_error().message());
    wait_ok(runtime, request);
    CHECK(runtime.rank() == 0 || checksum(data.data(), kBytes) == want, "message {} differs", i);
  }
  for (void* buffer : hog) tether::pinned_free(buffer);
  CHECK(runtime.barrier().has_value(), "barrier");
}

// Rank 0 starts rendezvous sends (a pool buffer: a key exposed to rank 1, and a malloc'd
// one: a cached registration) that rank 1 never receives, and both end their runtimes with
// them in flight. The abandoned requests must give their keys back while the transport
// that made them is still open (once they were given back after it closed: a use after
// free, seen by ASan).
void abandoned_at_shutdown(Runtime& runtime) {
  CHECK(runtime.size() == 2, "abandoned-at-shutdown runs on 2 ranks, not {}", runtime.size());
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  void* pool_buffer = tether::pinned_alloc(kBytes);
  static std::vector<std::byte> user_buffer(kBytes);  // outlives the runtime, as its abandoned send needs
  CHECK(pool_buffer != nullptr, "no pool buffer");
  Request sends[2];
  if (runtime.rank() == 0) {
    CHECK(runtime.isend(pool_buffer, kBytes, 1, 60, sends[0]) != Status::error, "{}", runtime.last_error().message());
    CHECK(runtime.isend(user_buffer.data(), kBytes, 1, 61, sends[1]) != Status::error, "{}",
          runtime.last_error().message());
  }
  CHECK(runtime.barrier().has_value(), "barrier");
  if (runtime.rank() == 0)
    CHECK(runtime.test(sends[0]) == Status::posted && runtime.test(sends[1]) == Status::posted,
          "the sends finished with no receive posted");
}

// Rank 0 runs with TETHER_INJECT_MEMLOCK_FAILURE=1: user memory cannot be registered there.
// Rank 1's rendezvous into rank 0's malloc'd buffer fails on both sides with memlock_limit
// and leaves that buffer untouched; the same message into rank 0's pool memory arrives,
// and rank 2's exchange with rank 0 goes on as if nothing happened.
void memlock_refused(Runtime& runtime) {
  CHECK(runtime.size() == 3, "memlock-refused runs on 3 ranks, not {}", runtime.size());
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  std::vector<std::byte> expected(kBytes);
  if (runtime.rank() == 0) {
    std::vector<std::byte> user(kBytes, std::byte{0x5a});
    Request refused;
    CHECK(runtime.irecv(user.data(), kBytes, 1, 5, refused) != Status::error, "{}", runtime.last_error().message());
    MessageInfo info;
    CHECK(runtime.wait(refused, &info) == Status::error && info.error == tether::Errc::memlock_limit,
          "the receive into unregistrable memory ended with {}", tether::errc_name(info.error));
    CHECK(std::all_of(user.begin(), user.end(), [](std::byte b) { return b == std::byte{0x5a}; }),
          "the refused message wrote into the receive buffer");
    for (int peer : {1, 2}) {
      auto* pooled = static_cast<std::byte*>(tether::pinned_alloc(kBytes));
      Request receive;
      CHECK(runtime.irecv(pooled, kBytes, peer, 6, receive) != Status::error, "{}", runtime.last_error().message());
      wait_ok(runtime, receive);
      CHECK(checksum(pooled, kBytes) == fill(expected.data(), kBytes, 100 + static_cast<std::uint64_t>(peer)),
            "rank {}'s message into pool memory differs", peer);
      tether::pinned_free(pooled);
    }
  } else {
    std::vector<std::byte> out(kBytes);
    if (runtime.rank() == 1) {
      fill(out.data(), kBytes, 1);
      Request send;
      CHECK(runtime.isend(out.data(), kBytes, 0, 5, send) != Status::error, "{}", runtime.last_error().message());
      MessageInfo info;
      CHECK(runtime.wait(send, &info) == Status::error && info.error == tether::Errc::memlock_limit,
            "the refused send ended with {}", tether::errc_name(info.error));
    }
    fill(out.data(), kBytes, 100 + static_cast<std::uint64_t>(runtime.rank()));
    Request send;
    CHECK(runtime.isend(out.data(), kBytes, 0, 6, send) != Status::error, "{}", runtime.last_error().message());
    wait_ok(runtime, send);
  }
}

void peer_death(Runtime& runtime) {
  if (runtime.rank() == 1) {
    std::fflush(nullptr);
    ::_exit(3);
  }
  if (runtime.rank() != 0) return;
  int value = 0;
  Request receive;
  CHECK(runtime.irecv(&value, 4, 1, 0, receive) != Status::error, "recv");
  MessageInfo info;
  Status status = runtime.wait(receive, &info);
  CHECK(status == Status::error && info.error == tether::Errc::peer_unreachable, "status {} error {}",
        static_cast<int>(status), tether::errc_name(info.error));
  std::fputs("rank 0 saw rank 1 die\n", stdout);
}

// Waits for `request` at most `seconds`: a request that never ends fails the check instead
// of running into tether-run's timeout.
Status wait_at_most(Runtime& runtime, Request& request, MessageInfo& info, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  Status status = runtime.test(request, &info);
  while (status == Status::posted && std::chrono::steady_clock::now() < deadline) status = runtime.test(request, &info);
  return status;
}

// Rank 1 sends rank 0 an eager message (tag 1), a 1 MiB rendezvous (tag 2) and a marker
// (tag 3), then dies once rank 0 has the marker (so the first two wait unexpected there).
// After the death, rank 0 must still get the eager message (it came before), and a receive
// from any source matching the rendezvous must fail with peer_unreachable instead of
// waiting for ever on the dead sender.
void dead_sender(Runtime& runtime) {
  constexpr std::size_t kLarge = std::size_t{1} << 20;
  std::vector<std::byte> large(kLarge);
  int value = 0;
  Request request;
  MessageInfo info;
  if (runtime.rank() == 1) {
    value = 41;
    Request eager, rendezvous, marker;
    CHECK(runtime.isend(&value, 4, 0, 1, eager) != Status::error &&
              runtime.isend(large.data(), kLarge, 0, 2, rendezvous) != Status::error &&
              runtime.isend(&value, 4, 0, 3, marker) != Status::error,
          "sends: {}", runtime.last_error().message());
    CHECK(runtime.irecv(&value, 4, 0, 4, request) != Status::error, "the go-ahead");
    wait_ok(runtime, request);  // rank 0 holds all three
    std::fflush(nullptr);
    ::_exit(3);
  }
  if (runtime.rank() != 0) return;
  CHECK(runtime.irecv(&value, 4, 1, 3, request) != Status::error, "the marker");
  wait_ok(runtime, request);
  CHECK(runtime.isend(&value, 4, 1, 4, request) != Status::error, "the go-ahead");
  wait_ok(runtime, request);
  CHECK(runtime.irecv(&value, 4, 1, 9, request) != Status::error, "a receive that only the death ends");
  CHECK(runtime.wait(request, &info) == Status::error && info.error == tether::Errc::peer_unreachable,
        "rank 1's death: {}", tether::errc_name(info.error));
  value = 0;
  CHECK(runtime.irecv(&value, 4, 1, 1, request) != Status::error, "the eager message");
  Status status = wait_at_most(runtime, request, info, 10);
  CHECK(status == Status::done && value == 41, "the eager message that came before the death: status {} {} value {}",
        static_cast<int>(status), tether::errc_name(info.error), value);
  CHECK(runtime.irecv(large.data(), kLarge, tether::kAnySource, 2, request) != Status::error, "the rendezvous");
  status = wait_at_most(runtime, request, info, 10);
  CHECK(status == Status::error && info.error == tether::Errc::peer_unreachable && info.source == 1,
        "a receive from any source matching a dead sender's rendezvous: status {} {}", static_cast<int>(status),
        tether::errc_name(info.error));
}

// TETHER_INJECT_WRITE_FAILURE=N: rank 0's N-th rendezvous write fails (its post, or with
// TETHER_INJECT_WRITE_FAILURE_AT=completion its completion). Its 1 MiB send to rank 1 fails
// with the transport error; rank 1's receive fails with it too, holding the N-1 chunks
// written before, not the failed one, and later ones only whole (a split receive also
// holds the half it read). Then a message each way lands whole: both ranks go on.
void write_failure(Runtime& runtime) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  constexpr auto kUntouched = std::byte{0xa5};
  const auto& config = tether::config::Config::global();
  const std::size_t chunk = config.size_bytes("TETHER_RNDV_CHUNK");
  const auto failing_write = static_cast<std::size_t>(config.integer("TETHER_INJECT_WRITE_FAILURE"));
  CHECK(runtime.size() == 2 && failing_write > 1 && chunk * failing_write < kBytes / 2,
        "write-failure needs 2 ranks and its failing write within the first half");
  auto* buffer = static_cast<std::byte*>(tether::pinned_alloc(kBytes));
  std::vector<std::byte> pattern(kBytes);
  fill(pattern.data(), kBytes, 41);
  MessageInfo info;
  if (runtime.rank() == 0) {
    std::memcpy(buffer, pattern.data(), kBytes);
    Request send;
    CHECK(runtime.isend(buffer, kBytes, 1, 8, send) != Status::error, "{}", runtime.last_error().message());
    CHECK(runtime.wait(send, &info) == Status::error && info.error == tether::Errc::transport,
          "the send whose write failed ended with {}", tether::errc_name(info.error));
  } else {
    std::memset(buffer, static_cast<int>(kUntouched), kBytes);
    Request receive;
    CHECK(runtime.irecv(buffer, kBytes, 0, 8, receive) != Status::error, "{}", runtime.last_error().message());
    CHECK(runtime.wait(receive, &info) == Status::error && info.error == tether::Errc::transport,
          "the receive whose sender's write failed ended with {}", tether::errc_name(info.error));
    bool split = config.choice("TETHER_RNDV_PROTOCOL") == "split";
    std::size_t written = split ? kBytes / 2 : kBytes;  // the sender's share
    std::size_t failed = (failing_write - 1) * chunk;
    auto untouched = [&](std::size_t from, std::size_t to) {
      return std::all_of(buffer + from, buffer + to, [&](std::byte b) { return b == kUntouched; });
    };
    CHECK(std::memcmp(buffer, pattern.data(), failed) == 0, "the {} bytes written before the failure differ", failed);
    CHECK(untouched(failed, failed + chunk), "the failed write's bytes landed");
    // A post that fails stops the writes after it; a completion that fails comes back while
    // later writes are posted, each of which lands whole.
    bool at_completion = config.choice("TETHER_INJECT_WRITE_FAILURE_AT") == "completion";
    for (std::size_t at = failed + chunk; at < written; at += chunk) {
      std::size_t end = std::min(at + chunk, written);
      bool whole = at_completion && std::memcmp(buffer + at, pattern.data() + at, end - at) == 0;
      CHECK(whole || untouched(at, end), "the chunk at {} after the failed write landed in part or unasked", at);
    }
    CHECK(std::memcmp(buffer + written, pattern.data() + written, kBytes - written) == 0,
          "the half the receiver read differs");
  }
  // Both go on: a rendezvous each way, checksummed (two chunks: rank 1's own writes stay
  // below the failing one).
  const std::size_t next_bytes = 2 * chunk;
  for (int sender : {0, 1}) {
    Request request;
    if (runtime.rank() == sender) {
      fill(buffer, next_bytes, 50 + static_cast<std::uint64_t>(sender));
      CHECK(runtime.isend(buffer, next_bytes, 1 - sender, 9, request) != Status::error, "{}",
            runtime.last_error().message());
      wait_ok(runtime, request);
    } else {
      CHECK(runtime.irecv(buffer, next_bytes, sender, 9, request) != Status::error, "{}",
            runtime.last_error().message());
      wait_ok(runtime, request);
      CHECK(checksum(buffer, next_bytes) == fill(pattern.data(), next_bytes, 50 + static_cast<std::uint64_t>(sender)),
            "the message after the failure differs");
    }
  }
  tether::pinned_free(buffer);
}

// Run with a larger TETHER_RNDV_CHUNK on rank 1 than on rank 0 (mpirun's per-context -x):
// rank 1's CTS asks for chunks rank 0 cannot write. Both requests fail with invalid_argument
// (rank 0's log names TETHER_RNDV_CHUNK) instead of rank 1 waiting for writes; then an
// eager message each way lands whole.
void chunk_mismatch(Runtime& runtime) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  CHECK(runtime.size() == 2, "chunk-mismatch runs on 2 ranks, not {}", runtime.size());
  auto* buffer = static_cast<std::byte*>(tether::pinned_alloc(kBytes));
  fill(buffer, kBytes, 7);
  Request request;
  MessageInfo info;
  if (runtime.rank() == 0)
    CHECK(runtime.isend(buffer, kBytes, 1, 10, request) != Status::error, "{}", runtime.last_error().message());
  else CHECK(runtime.irecv(buffer, kBytes, 0, 10, request) != Status::error, "{}", runtime.last_error().message());
  CHECK(runtime.wait(request, &info) == Status::error && info.error == tether::Errc::invalid_argument,
        "the {} ended with {}", runtime.rank() == 0 ? "send" : "receive", tether::errc_name(info.error));
  int token = runtime.rank() + 100;
  int other = -1;
  Request send, receive;
  CHECK(runtime.irecv(&other, sizeof other, 1 - runtime.rank(), 11, receive) != Status::error, "recv");
  CHECK(runtime.isend(&token, sizeof token, 1 - runtime.rank(), 11, send) != Status::error, "send");
  wait_ok(runtime, send);
  wait_ok(runtime, receive);
  CHECK(other == 101 - runtime.rank(), "the message after the refused one carried {}", other);
  tether::pinned_free(buffer);
}

// Run by MessagingFailureTest.KilledLauncherEndsTheRanksWaits, with a directory `out`: each
// rank writes its pid to out/rank<r>.pid, then waits for a message nobody sends (rank 1 from
// any rank). The test SIGKILLs tether-run, the PMIx server: the wait must fail with
// peer_unreachable naming the lost server. The rank writes what the wait returned to
// out/rank<r>.result and exits (no closing barrier: there is no server).
void launcher_lost(Runtime& runtime, const char* out) {
  std::signal(SIGPIPE, SIG_IGN);  // its output pipes lead to the dead launcher
  // tether-run's ranks die with it (PR_SET_PDEATHSIG); this one stays, as under a PMIx
  // server that dies without killing its ranks, to see the runtime notice the loss.
  ::prctl(PR_SET_PDEATHSIG, 0);
  CHECK(out != nullptr && runtime.size() == 2, "launcher-lost needs a directory argument and 2 ranks");
  auto write_file = [&](const char* suffix, const std::string& text) {
    std::string path = fmt::format("{}/rank{}.{}", out, runtime.rank(), suffix);
    std::string partial = path + ".partial";
    if (std::FILE* file = std::fopen(partial.c_str(), "w")) {
      std::fputs(text.c_str(), file);
      std::fclose(file);
      std::rename(partial.c_str(), path.c_str());
    }
  };
  int never = 0;
  Request request;
  int source = runtime.rank() == 0 ? 1 : tether::kAnySource;  // rank 1: from any rank, which must fail too
  CHECK(runtime.irecv(&never, sizeof never, source, 98, request) != Status::error, "recv");
  write_file("pid", std::to_string(::getpid()));
  MessageInfo info;
  Status status = runtime.wait(request, &info);
  write_file("result", fmt::format("status {} error {}: {}", static_cast<int>(status), tether::errc_name(info.error),
                                   status == Status::error ? runtime.last_error().message() : ""));
  std::_Exit(0);
}

// A rendezvous matched by a receive from any source, whose sender then goes silent: rank 0
// starts a 1 MiB send and sleeps for kSilentSeconds without calling the runtime (no probe
// answered). Rank 1's receive must fail with peer_unreachable once TETHER_PEER_TIMEOUT (1 s
// in the test) passed, long before rank 0 wakes. Neither waits in a closing barrier.
void silent_sender(Runtime& runtime) {
  constexpr int kSilentSeconds = 5;
  static std::vector<std::byte> buffer(std::size_t{1} << 20, std::byte{7});  // outlives the send abandoned at shutdown
  if (runtime.rank() > 1) return;
  // A small exchange first, so the pair's connection is open (tcp-own opens it on first
  // use, with progress) and the RTS leaves within rank 0's isend.
  int token = runtime.rank();
  Request hello;
  if (runtime.rank() == 0) {
    CHECK(runtime.isend(&token, sizeof token, 1, 2, hello) != Status::error, "send");
    wait_ok(runtime, hello);
    CHECK(runtime.irecv(&token, sizeof token, 1, 2, hello) != Status::error, "recv");
    wait_ok(runtime, hello);
  } else {
    CHECK(runtime.irecv(&token, sizeof token, 0, 2, hello) != Status::error, "recv");
    wait_ok(runtime, hello);
    CHECK(runtime.isend(&token, sizeof token, 0, 2, hello) != Status::error, "send");
    wait_ok(runtime, hello);
  }
  if (runtime.rank() == 0) {
    Request send;
    CHECK(runtime.isend(buffer.data(), buffer.size(), 1, 3, send) != Status::error, "send");
    std::this_thread::sleep_for(std::chrono::seconds(kSilentSeconds));
    return;  // its send abandoned at shutdown
  }
  Request receive;
  MessageInfo info;
  auto start = std::chrono::steady_clock::now();
  CHECK(runtime.irecv(buffer.data(), buffer.size(), tether::kAnySource, 3, receive) != Status::error, "recv");
  Status status = runtime.wait(receive, &info);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(status == Status::error && info.error == tether::Errc::peer_unreachable, "status {} error {}",
        static_cast<int>(status), tether::errc_name(info.error));
  CHECK(waited < kSilentSeconds - 2, "the receive failed after {:.1f} s, not within the peer timeout", waited);
  fmt::print("rank 1 gave up on silent rank 0 after {:.1f} s\n", waited);
}

// Whether this rank, its runtime up and a message exchanged, has libfabric mapped: printed
// for the test to compare with what the transport choice implies.
void libfabric_mapped(Runtime& runtime) {
  int peer = (runtime.rank() + 1) % runtime.size();
  int out = runtime.rank(), in = -1;
  Request send, receive;
  CHECK(runtime.irecv(&in, sizeof in, (runtime.rank() + runtime.size() - 1) % runtime.size(), 9, receive) != Status::error, "recv");
  CHECK(runtime.isend(&out, sizeof out, peer, 9, send) != Status::error, "send");
  wait_ok(runtime, send);
  wait_ok(runtime, receive);
  bool mapped = tether::testing::library_mapped("libfabric.so");
  fmt::print("rank {}: libfabric {}mapped\n", runtime.rank(), mapped ? "" : "not ");
}

}  // namespace

// Rank 1 stops calling the runtime, so rank 0's small messages fill the transport's queue
// and wait in rank 0's backlog; rank 0 ends its runtime and rank 1 dies during that
// shutdown's drain. The death must still count there: the drain drops the dead rank's
// messages instead of waiting its whole 2 s for them and warning they were not delivered.
int finalize_dead_peer(std::unique_ptr<Runtime> runtime) {
  constexpr int kSends = 4096;  // more than libfabric shm's queue (1024) holds
  constexpr auto kDieAfter = std::chrono::milliseconds(500);
  CHECK(runtime->size() == 2, "finalize-dead-peer runs on 2 ranks, not {}", runtime->size());
  CHECK(runtime->barrier().has_value(), "barrier");
  if (runtime->rank() == 1) {
    std::this_thread::sleep_for(kDieAfter);
    std::fflush(nullptr);
    ::_exit(3);
  }
  int value = 7;
  std::vector<Request> sends(kSends);
  for (Request& send : sends)
    CHECK(runtime->isend(&value, sizeof value, 1, 1, send) != Status::error, "{}", runtime->last_error().message());
  auto start = std::chrono::steady_clock::now();
  runtime.reset();  // the drain, then the shutdown fence
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("rank 0 ended its runtime in {:.2f} s\n", took);  // the test reads the drain's warning
  if (tether::testing::rank_checks_passed()) fmt::print("rank 0: finalize-dead-peer passed\n");
  std::fflush(nullptr);
  return tether::testing::rank_checks_passed() ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs("usage: tether-messaging-check sizes|sizes-pool|ordering|sends-at-start|read-in-place|wildcards|\n"
               "       truncation|many|bad-input|peer-death|silent-sender|write-failure|chunk-mismatch|\n"
               "       launcher-lost DIR|pressure|exhausted-pool-rendezvous|abandoned-at-shutdown|\n"
               "       memlock-refused|threads|libfabric-mapped|finalize-dead-peer\n",
               stderr);
    return 2;
  }
  auto runtime = tether::testing::start_job_or_exit("tether-messaging-check");
  std::string_view scenario(argv[1]);
  if (scenario == "finalize-dead-peer") return finalize_dead_peer(std::move(runtime));
  std::map<std::string_view, std::function<void(Runtime&)>> scenarios = {
      {"sizes", [](Runtime& r) { sizes(r, false); }}, {"sizes-pool", [](Runtime& r) { sizes(r, true); }},
      {"ordering", ordering}, {"sends-at-start", sends_at_start}, {"read-in-place", read_in_place},
      {"waited-in-place", waited_in_place},
      {"wildcards", wildcards}, {"truncation", truncation}, {"many", many},
      {"bad-input", bad_input}, {"peer-death", peer_death}, {"dead-sender", dead_sender},
      {"silent-sender", silent_sender},
      {"write-failure", write_failure}, {"chunk-mismatch", chunk_mismatch},
      {"launcher-lost", [&](Runtime& r) { launcher_lost(r, argc > 2 ? argv[2] : nullptr); }},
      {"pressure", pressure}, {"exhausted-pool-rendezvous", exhausted_pool_rendezvous},
      {"abandoned-at-shutdown", abandoned_at_shutdown},
      {"memlock-refused", memlock_refused}, {"threads", threads}, {"libfabric-mapped", libfabric_mapped}};
  auto found = scenarios.find(scenario);
  if (found == scenarios.end()) {
    fmt::print(stderr, "unknown scenario {}\n", scenario);
    return 2;
  }
  found->second(*runtime);
  if (scenario != "peer-death" && scenario != "silent-sender") (void)runtime->barrier();  // a peer counts as gone
  if (tether::testing::rank_checks_passed()) fmt::print("rank {}: {} passed\n", runtime->rank(), scenario);
  return tether::testing::rank_checks_passed() ? 0 : 1;
}
