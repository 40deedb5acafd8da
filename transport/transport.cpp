// The backend-independent half of Transport: pool attachment, remote buffer descriptions,
// errors of post calls.
#include "transport/transport.hpp"

#include <cstring>

#include "runtime/base/log.hpp"

namespace tether::transport {

Expected<void> Transport::attach_pool() {
  if (pool_slot_ >= 0) return {};
  auto slot = pool_add_registrar(registrar());
  if (!slot) return tl::unexpected(slot.error());
  pool_slot_ = *slot;
  log::info("transport", "{}: pool arenas registered (registrar slot {})", name(), pool_slot_);
  return {};
}

void Transport::detach_pool() noexcept {
  if (pool_slot_ < 0) return;
  pool_remove_registrar(pool_slot_);
  pool_slot_ = -1;
}

RemoteBuffer Transport::describe(const Registration& registration, const void* address,
                                 std::size_t length) noexcept {
  return RemoteBuffer{reinterpret_cast<std::uint64_t>(address), registration.remote_key,
                      reinterpret_cast<std::uint64_t>(registration.address), length};
}

Expected<RemoteBuffer> Transport::describe_pool_buffer(const void* address, std::size_t length) const {
  PoolLocation location;
  if (pool_slot_ < 0 || !pool_find(address, location) ||
      (location.registered_mask & (1U << pool_slot_)) == 0)
    return make_error(Errc::not_from_pool,
                      fmt::format("{} is not a pool buffer registered with {}", address, name()),
                      "allocate it with tether::pinned_alloc and call attach_pool() first");
  if (location.offset + length > location.arena_length)
    return make_error(Errc::invalid_argument,
                      fmt::format("{} + {} bytes runs past its arena", address, length),
                      "describe only the bytes of one pool buffer");
  return describe(location.registrations[pool_slot_], address, length);
}

void* Transport::pool_descriptor(const void* address) const noexcept {
  PoolLocation location;
  if (pool_slot_ < 0 || !pool_find(address, location)) return nullptr;
  if ((location.registered_mask & (1U << pool_slot_)) == 0) return nullptr;
  return location.registrations[pool_slot_].local_descriptor;
}

Status Transport::fail(Errc code, std::string cause, std::string remedy, int sys_errno) noexcept {
  try {
    last_error_ = Error{code, sys_errno, std::move(cause), std::move(remedy)};
  } catch (...) {
    last_error_.code = code;
  }
  return Status::error;
}

Expected<Registration> register_pages(Registrar& registrar, const void* address, std::size_t bytes) {
  auto start = reinterpret_cast<std::uintptr_t>(address) & ~(kPageBytes - 1);
  auto end = (reinterpret_cast<std::uintptr_t>(address) + bytes + kPageBytes - 1) & ~(kPageBytes - 1);
  return registrar.register_range(reinterpret_cast<void*>(start), end - start, Access::all);
}

}  // namespace tether::transport
