// tether-key-scope-check: a 2-rank job that probes what the keys rank 0 hands out reach
// (TETHER_REMOTE_KEYS). Rank 1 takes the key of rank 0's receive channel slots and the
// key of a rendezvous landing buffer, and writes with each through an endpoint of its
// own: inside the handed-out range, 64 bytes before it, and into a bait buffer elsewhere
// in the same pool arena. Rank 0 checks what landed by checksum; both print one line per
// write and the key registrations counted, which tests/hostile/key_scope_test.cpp reads.
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "persist/channel_registry.hpp"
#include "runtime/messaging/engine.hpp"
#include "tests/hostile/hostile_wire.hpp"
#include "tests/support/rank_check.hpp"
#include "tests/support/start_job.hpp"
#include "tether/persist.hpp"
#include "tether/pool.hpp"
#include "tether/runtime.hpp"

namespace {

using tether::Request;
using tether::Runtime;
using tether::Status;
using tether::transport::RemoteBuffer;
namespace persist = tether::persist;
namespace transport = tether::transport;

constexpr int kOwner = 0;
constexpr int kWriter = 1;
constexpr int kSetupTag = 30;
constexpr int kDoneTag = 31;
constexpr int kRendezvousTag = 40;
constexpr int kCountedTag = 41;
constexpr int kCountedTransfers = 3;
constexpr std::size_t kBaitBytes = 4096;
constexpr std::size_t kGuardBytes = 64;
constexpr std::size_t kLandingBytes = 64 * 1024;  // above the eager limit: rendezvous
constexpr tether::ChannelShape kShape{.peer = 0, .tag = 5, .slot_bytes = 4096, .slots = 4, .partitions = 1};

// What rank 0 tells rank 1 before the writes.
struct Setup {
  std::uint64_t bait_address = 0;  // a pool buffer in the arena of the handed-out range
  RemoteBuffer key{};              // rendezvous phase: the landing key (channels: from the hello)
  std::uint64_t receive_id = 0;    // rendezvous phase: notification that completes the receive
  std::uint32_t address_bytes = 0;
  std::byte address[256] = {};     // rank 0's endpoint
};

struct Done {
  std::uint32_t writes = 0;
};

std::uint8_t byte_at(std::uint64_t seed, std::size_t index) {
  return static_cast<std::uint8_t>((seed * 0x9e3779b97f4a7c15ULL + index * 0x632be59bd9b4e019ULL) >> 56);
}

void fill(void* buffer, std::size_t bytes, std::uint64_t seed) {
  auto* out = static_cast<std::uint8_t*>(buffer);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = byte_at(seed, i);
}

// Bytes from the start that hold the pattern of `seed`.
std::size_t pattern_bytes(const void* buffer, std::size_t bytes, std::uint64_t seed) {
  auto* in = static_cast<const std::uint8_t*>(buffer);
  std::size_t index = 0;
  while (index < bytes && in[index] == byte_at(seed, index)) ++index;
  return index;
}

// Bytes anywhere that hold the pattern of `seed` at their position.
std::size_t matching_bytes(const void* buffer, std::size_t bytes, std::uint64_t seed) {
  auto* in = static_cast<const std::uint8_t*>(buffer);
  std::size_t count = 0;
  for (std::size_t index = 0; index < bytes; ++index) count += in[index] == byte_at(seed, index);
  return count;
}

bool filled_with(const void* buffer, std::size_t bytes, std::uint64_t seed) {
  return pattern_bytes(buffer, bytes, seed) == bytes;
}

bool exchange(Runtime& runtime, void* buffer, std::size_t bytes, int tag, bool send) {
  Request request;
  int peer = 1 - runtime.rank();
  Status started = send ? runtime.isend(buffer, bytes, peer, tag, request) : runtime.irecv(buffer, bytes, peer, tag, request);
  return started != Status::error && runtime.wait(request) == Status::done;
}

bool exact_keys(Runtime& runtime) {
  auto& transport = runtime.engine().transport();
  auto scope = runtime.engine().remote_key_scope();
  bool exact = scope == transport::KeyScope::exact ||
               (scope == transport::KeyScope::automatic && transport.range_keys_are_cheap());
  return exact && transport.checks_remote_keys();
}

bool same_arena(const void* a, const void* b) {
  tether::PoolLocation first, second;
  return tether::pool_find(a, first) && tether::pool_find(b, second) && first.arena_base == second.arena_base;
}

// --- rank 1's own endpoint -------------------------------------------------------------

enum class Outcome { landed, refused, unanswered };

const char* outcome_name(Outcome outcome) {
  return outcome == Outcome::landed ? "landed" : outcome == Outcome::refused ? "refused" : "unanswered";
}

std::string writer_spec(Runtime& runtime) {
  std::string_view name = runtime.engine().transport().name();
  if (name.starts_with("ofi:shm")) return "ofi:shm";
  if (name.starts_with("shm-own")) return "shm-own";
  if (name.starts_with("tcp-own")) return std::string(name);  // tcp-own:<interface>
  return "ofi";
}

// One write of `bytes` from `source` to `target` through a fresh endpoint (a provider may
// drop the connection after a key violation). ofi:shm answers no bad-key write at all.
Outcome write_through_own_endpoint(Runtime& runtime, const Setup& setup, const void* source, std::size_t bytes,
                                   const RemoteBuffer& target) {
  auto opened = transport::open_transport(writer_spec(runtime));
  CHECK(opened.has_value(), "{}", opened ? "" : opened.error().message());
  if (!opened) return Outcome::unanswered;
  auto& endpoint = **opened;
  auto attached = endpoint.attach_pool();
  auto peer = endpoint.insert_peer(std::span(setup.address, setup.address_bytes));
  CHECK(attached && peer, "writer endpoint: {}", !attached ? attached.error().message() : peer ? "" : peer.error().message());
  if (!attached || !peer) return Outcome::unanswered;
  // libfabric shm never answers a bad-key write, so there the deadline is how long
  // "unanswered" takes to establish (its writes that land are answered within milliseconds);
  // elsewhere it also covers connecting, which a loaded machine can make slow.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(writer_spec(runtime) == "ofi:shm" ? 2 : 5);
  transport::Completion completions[4];
  Status posted = endpoint.write(*peer, source, bytes, nullptr, target, 0, 1);
  while (posted == Status::retry && std::chrono::steady_clock::now() < deadline) {  // connecting
    (void)endpoint.poll(completions);
    posted = endpoint.write(*peer, source, bytes, nullptr, target, 0, 1);
  }
  if (posted == Status::error) return Outcome::refused;
  while (posted == Status::posted && std::chrono::steady_clock::now() < deadline) {
    std::size_t count = endpoint.poll(completions);
    for (std::size_t i = 0; i < count; ++i) {
      if (completions[i].kind == transport::CompletionKind::write_done) return Outcome::landed;
      if (completions[i].kind == transport::CompletionKind::error) return Outcome::refused;
    }
  }
  return posted == Status::done ? Outcome::landed : Outcome::unanswered;
}

void report(int rank, const char* phase, const char* where, Outcome outcome) {
  fmt::print("rank {}: {} write {}: {}\n", rank, phase, where, outcome_name(outcome));
}

// Inside, 64 bytes before (only where those bytes are the test's own or nothing lands),
// and into the bait. The bait and guard bytes are the owner's to check.
void probe_key(Runtime& runtime, const Setup& setup, const RemoteBuffer& key, const char* phase, bool guard_is_ours) {
  auto* source = static_cast<std::byte*>(tether::pinned_alloc(kLandingBytes, 64));
  fill(source, kLandingBytes, 11);
  report(kWriter, phase, "inside the key's range", write_through_own_endpoint(runtime, setup, source, kBaitBytes, key));
  if (guard_is_ours || exact_keys(runtime)) {
    RemoteBuffer before = key;
    before.address -= kGuardBytes;
    before.length = kGuardBytes;
    report(kWriter, phase, "64 bytes before the range", write_through_own_endpoint(runtime, setup, source, kGuardBytes, before));
  }
  RemoteBuffer bait = key;
  bait.address = setup.bait_address;
  bait.length = kBaitBytes;
  report(kWriter, phase, "into the bait elsewhere in the arena", write_through_own_endpoint(runtime, setup, source, kBaitBytes, bait));
  tether::pinned_free(source);
}

// --- rank 0's side of the checks -------------------------------------------------------

Setup make_setup(Runtime& runtime, const void* bait) {
  Setup setup;
  setup.bait_address = reinterpret_cast<std::uint64_t>(bait);
  auto address = runtime.engine().transport().address();
  CHECK(address.size() <= sizeof setup.address, "a {}-byte endpoint address", address.size());
  setup.address_bytes = static_cast<std::uint32_t>(std::min(address.size(), sizeof setup.address));
  std::memcpy(setup.address, address.data(), setup.address_bytes);
  return setup;
}

// The bait (and guard) hold their patterns unless the key reaches them (arena keys).
void check_untouched(Runtime& runtime, const char* phase, const void* bait, const void* guard) {
  bool exact = exact_keys(runtime);
  bool bait_kept = filled_with(bait, kBaitBytes, 21);
  fmt::print("rank 0: {} bait {}\n", phase, bait_kept ? "unchanged" : "overwritten");
  CHECK(bait_kept == exact, "{}: the bait was {} with {} keys", phase, bait_kept ? "kept" : "overwritten",
        exact ? "exact" : "arena");
  if (guard == nullptr) return;
  bool guard_kept = filled_with(guard, kGuardBytes, 22);
  fmt::print("rank 0: {} 64 bytes before the range {}\n", phase, guard_kept ? "unchanged" : "overwritten");
  CHECK(guard_kept == exact, "{}: the 64 bytes before the range were {}", phase, guard_kept ? "kept" : "overwritten");
}

std::byte* make_bait(const void* near) {
  auto* bait = static_cast<std::byte*>(tether::pinned_alloc(kBaitBytes, 64));
  fill(bait, kBaitBytes, 21);
  CHECK(same_arena(bait, near), "the bait {} is not in the arena of {}", static_cast<void*>(bait), near);
  return bait;
}

// --- phase 1: a receive channel's slots ------------------------------------------------

persist::ChannelState* connect_channel(Runtime& runtime) {
  auto& registry = persist::ChannelRegistry::of(runtime);
  tether::ChannelShape shape = kShape;
  shape.peer = 1 - runtime.rank();
  auto role = runtime.rank() == kOwner ? persist::Role::receive : persist::Role::send;
  auto channel = registry.create(role, shape, {});
  CHECK(channel.has_value(), "{}", channel ? "" : channel.error().message());
  if (!channel) std::exit(1);
  auto connected = registry.wait_connected(**channel);
  CHECK(connected.has_value(), "{}", connected ? "" : connected.error().message());
  return *channel;
}

void check_channel_registrations(Runtime& runtime) {
  std::uint64_t counted = tether::channel_stats(runtime).key_registrations;
  std::uint64_t expected = !exact_keys(runtime) ? 0 : runtime.rank() == kOwner ? 2 : 1;  // slots + flags; credit word
  fmt::print("rank {}: channel key registrations {}\n", runtime.rank(), counted);
  CHECK(counted == expected, "{} channel key registrations, {} expected", counted, expected);
}

void channel_phase(Runtime& runtime) {
  persist::ChannelState* channel = connect_channel(runtime);
  check_channel_registrations(runtime);
  if (runtime.rank() == kOwner) {
    std::byte* slot = channel->memory;
    std::byte* bait = make_bait(slot);
    std::vector<std::byte> before(slot - kGuardBytes, slot);
    Setup setup = make_setup(runtime, bait);
    CHECK(exchange(runtime, &setup, sizeof setup, kSetupTag, true), "setup");
    Done done;
    CHECK(exchange(runtime, &done, sizeof done, kDoneTag, false), "done");
    bool inside = filled_with(slot, kBaitBytes, 11);
    fmt::print("rank 0: channel slot {}\n", inside ? "holds the write" : "lacks the write");
    CHECK(inside, "the write inside the channel key's range did not land");
    bool guard_kept = std::memcmp(before.data(), slot - kGuardBytes, kGuardBytes) == 0;
    CHECK(!exact_keys(runtime) || guard_kept, "the 64 bytes before the slots changed");
    check_untouched(runtime, "channel", bait, nullptr);
    return;
  }
  Setup setup;
  CHECK(exchange(runtime, &setup, sizeof setup, kSetupTag, false), "setup");
  probe_key(runtime, setup, channel->peer_landing, "channel", false);
  Done done;
  CHECK(exchange(runtime, &done, sizeof done, kDoneTag, true), "done");
}

// --- phase 2: a rendezvous landing buffer ----------------------------------------------

RemoteBuffer wait_exposed(Runtime& runtime, const Request& receive) {
  auto& engine = runtime.engine();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    runtime.progress();
    std::lock_guard lock(engine.progress_mutex());
    RemoteBuffer key = engine.exposed_to_peer(receive);
    if (key.length != 0 || std::chrono::steady_clock::now() > deadline) return key;
  }
}

void check_key_counts(Runtime& runtime, const transport::KeyStats& before, std::uint64_t transfers, const char* what) {
  transport::KeyStats after = runtime.engine().transport().key_stats();
  std::uint64_t registered = after.range_registrations - before.range_registrations;
  std::uint64_t released = after.range_releases - before.range_releases;
  std::uint64_t arena = after.arena_keys - before.arena_keys;
  fmt::print("rank 0: {}: {} range registrations, {} released, {} arena keys\n", what, registered, released, arena);
  bool exact = exact_keys(runtime);
  CHECK(registered == (exact ? transfers : 0) && released == registered && arena == (exact ? 0 : transfers),
        "{}: {} registrations, {} released, {} arena keys for {} transfers", what, registered, released, arena, transfers);
}

void check_landing_write(const std::byte* landing) {
  std::size_t matching = matching_bytes(landing, kLandingBytes, 12);
  CHECK(matching == kLandingBytes, "the landing buffer holds {} of the last write's {} bytes (first wrong: {}; the "
        "first write's: {})", matching, kLandingBytes, pattern_bytes(landing, kLandingBytes, 12),
        matching_bytes(landing, kLandingBytes, 11));
}

void own_landing(Runtime& runtime) {
  auto* whole = static_cast<std::byte*>(tether::pinned_alloc(kLandingBytes + 2 * kGuardBytes, 64));
  std::byte* landing = whole + kGuardBytes;
  fill(whole, kGuardBytes, 22);
  std::byte* bait = make_bait(landing);
  transport::KeyStats before = runtime.engine().transport().key_stats();
  Request receive;
  CHECK(runtime.irecv(landing, kLandingBytes, kWriter, kRendezvousTag, receive) != Status::error, "irecv");
  Setup setup = make_setup(runtime, bait);
  setup.key = wait_exposed(runtime, receive);
  CHECK(setup.key.length == kLandingBytes, "no landing key after 20 s ({} bytes)", setup.key.length);
  setup.receive_id = (std::uint64_t{receive.generation & 0x7fffffffU} << 32) | receive.slot;
  CHECK(exchange(runtime, &setup, sizeof setup, kSetupTag, true), "setup");
  tether::MessageInfo info;
  CHECK(runtime.wait(receive, &info) == Status::done, "the landing receive: {}", tether::errc_name(info.error));
  check_landing_write(landing);
  check_untouched(runtime, "rendezvous", bait, whole);
  check_key_counts(runtime, before, 1, "landing key");
  (void)runtime.barrier();  // the writer may free its source now
}

// The last write, with the receive's notification, through the engine's endpoint. Its
// completion goes to the engine, not here, so `source` stays untouched until the caller's
// next barrier: libfabric shm copies from it (CMA) at the target, maybe after "done".
void complete_landing(Runtime& runtime, const Setup& setup, std::byte* source) {
  auto& engine = runtime.engine();
  fill(source, kLandingBytes, 12);
  std::uint64_t context = tether::messaging::make_context(tether::messaging::ContextKind::channel, 0);
  Status status = Status::retry;
  while (status == Status::retry) {
    {
      std::lock_guard lock(engine.progress_mutex());
      auto peer = engine.peer_index(kOwner);
      status = peer ? engine.transport().write_with_notification(*peer, source, kLandingBytes, nullptr, setup.key, 0,
                                                                  setup.receive_id, context)
                    : Status::error;
    }
    runtime.progress();
  }
  CHECK(status != Status::error, "the landing write: {}", engine.transport().last_error().message());
  Done done;
  CHECK(exchange(runtime, &done, sizeof done, kDoneTag, true), "done");
}

void rendezvous_phase(Runtime& runtime) {
  if (runtime.rank() == kOwner) return own_landing(runtime);
  {
    auto& engine = runtime.engine();
    auto orphan = tether::hostile::orphan_put(kWriter, kRendezvousTag, kLandingBytes);
    std::lock_guard lock(engine.progress_mutex());
    engine.post_raw(kOwner, orphan.bytes, orphan.take_sequence);
  }
  Setup setup;
  CHECK(exchange(runtime, &setup, sizeof setup, kSetupTag, false), "setup");
  probe_key(runtime, setup, setup.key, "rendezvous", true);
  auto* source = static_cast<std::byte*>(tether::pinned_alloc(kLandingBytes, 64));
  complete_landing(runtime, setup, source);
  (void)runtime.barrier();  // the owner has checked what landed
  tether::pinned_free(source);
}

// --- phase 3: ordinary transfers count one registration each ---------------------------

void counted_phase(Runtime& runtime) {
  auto* buffer = static_cast<std::byte*>(tether::pinned_alloc(kLandingBytes, 64));
  transport::KeyStats before = runtime.engine().transport().key_stats();
  for (int i = 0; i < kCountedTransfers; ++i) {
    if (runtime.rank() == kWriter) fill(buffer, kLandingBytes, 100 + static_cast<std::uint64_t>(i));
    CHECK(exchange(runtime, buffer, kLandingBytes, kCountedTag, runtime.rank() == kWriter), "transfer {}", i);
    if (runtime.rank() == kOwner)
      CHECK(filled_with(buffer, kLandingBytes, 100 + static_cast<std::uint64_t>(i)), "transfer {} differs", i);
  }
  if (runtime.rank() == kOwner) check_key_counts(runtime, before, kCountedTransfers, "put transfers");
  tether::pinned_free(buffer);
}

}  // namespace

int main() {
  auto runtime = tether::testing::start_job_or_exit("tether-key-scope-check", 2);
  Runtime& r = *runtime;
  fmt::print("rank {}: {} with {} keys\n", r.rank(), r.engine().transport().name(), exact_keys(r) ? "exact" : "arena");
  channel_phase(r);
  (void)r.barrier();
  rendezvous_phase(r);
  (void)r.barrier();
  counted_phase(r);
  if (tether::testing::rank_checks_passed()) fmt::print("rank {}: key scope passed\n", r.rank());
  return tether::testing::rank_checks_passed() ? 0 : 1;
}
