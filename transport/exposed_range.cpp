// Keys handed to peers for pool memory: a registration of just the handed-out range
// (TETHER_REMOTE_KEYS=exact) or the arena's key, and the handle that revokes the former.
#include "transport/transport.hpp"

namespace tether::transport {

ExposedRange& ExposedRange::operator=(ExposedRange&& other) noexcept {
  if (this != &other) {
    release();
    take(other);
  }
  return *this;
}

void ExposedRange::take(ExposedRange& other) noexcept {
  remote_ = other.remote_;
  registrar_ = other.registrar_;
  registration_ = other.registration_;
  counters_ = other.counters_;
  other.remote_ = {};
  other.registrar_ = nullptr;
  other.counters_ = nullptr;
}

void ExposedRange::close_registration() noexcept {
  registrar_->deregister(registration_);
  registrar_ = nullptr;
  if (counters_ != nullptr) counters_->range_releases.fetch_add(1, std::memory_order_relaxed);
  counters_ = nullptr;
}

Expected<ExposedRange> Transport::expose_pool_range(PeerIndex peer, const void* address, std::size_t length,
                                                    Access access, KeyScope scope) {
  auto arena = describe_pool_buffer_for(peer, address, length);
  if (!arena) return tl::unexpected(arena.error());
  bool exact = scope == KeyScope::exact || (scope == KeyScope::automatic && range_keys_are_cheap());
  if (!exact || !checks_remote_keys() || length == 0) {
    key_counters_.arena_keys.fetch_add(1, std::memory_order_relaxed);
    return ExposedRange(*arena);
  }
  auto registration = registrar().register_range(const_cast<void*>(address), length, access);
  if (!registration) {
    Error error = registration.error();
    error.remedy += "; or set TETHER_REMOTE_KEYS=arena to hand peers the pool arena's key (no registration)";
    return tl::unexpected(std::move(error));
  }
  key_counters_.range_registrations.fetch_add(1, std::memory_order_relaxed);
  return ExposedRange(describe_for(peer, *registration, address, length), registrar(), *registration, key_counters_);
}

KeyStats Transport::key_stats() const noexcept {
  return KeyStats{key_counters_.range_registrations.load(std::memory_order_relaxed),
                  key_counters_.range_releases.load(std::memory_order_relaxed),
                  key_counters_.arena_keys.load(std::memory_order_relaxed)};
}

}  // namespace tether::transport
