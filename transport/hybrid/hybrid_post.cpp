// Hybrid's hot path: each post goes to the peer's backend with that backend's peer
// index and descriptor; poll drains both backends and renames their peers.
#include "transport/hybrid/hybrid_transport.hpp"

namespace tether::transport::hybrid {

bool HybridTransport::known(PeerIndex peer) noexcept {
  if (peer < routes_.size()) return true;
  (void)fail(Errc::invalid_argument, fmt::format("peer index {} was never inserted ({} known)", peer, routes_.size()),
             "insert the peer's address first");
  return false;
}

void* HybridTransport::part_descriptor(void* descriptor, Route route) noexcept {
  if (descriptor == nullptr) return nullptr;
  return static_cast<HybridRegistration*>(descriptor)->parts[static_cast<std::size_t>(route)].local_descriptor;
}

Status HybridTransport::relay(Route route, Status status) noexcept {
  if (status == Status::error) last_error_ = backend(route).last_error();
  return status;
}

// Receive buffers alternate between the backends; a buffer goes back to the one it
// came from, so each keeps half of them.
Status HybridTransport::post_receive(void* buffer, std::size_t length, void* descriptor,
                                     std::uint64_t context) noexcept {
  Route route = Route::local;
  if (auto found = receive_route_.find(buffer); found != receive_route_.end()) {
    route = found->second;
  } else {
    route = receives_posted_++ % 2 == 0 ? Route::local : Route::network;
    try {
      receive_route_.emplace(buffer, route);
    } catch (...) {
      return Status::retry;
    }
  }
  return relay(route, backend(route).post_receive(buffer, length, part_descriptor(descriptor, route), context));
}

Status HybridTransport::send(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                             std::uint64_t context) noexcept {
  if (!known(peer)) return Status::error;
  auto [route, to] = routes_[peer];
  return relay(route, backend(route).send(to, buffer, length, part_descriptor(descriptor, route), context));
}

Status HybridTransport::write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                              const RemoteBuffer& target, std::size_t target_offset, std::uint64_t context) noexcept {
  if (!known(peer)) return Status::error;
  auto [route, to] = routes_[peer];
  return relay(route, backend(route).write(to, buffer, length, part_descriptor(descriptor, route), target,
                                           target_offset, context));
}

Status HybridTransport::write_with_notification(PeerIndex peer, const void* buffer, std::size_t length,
                                                void* descriptor, const RemoteBuffer& target,
                                                std::size_t target_offset, std::uint64_t notification,
                                                std::uint64_t context) noexcept {
  if (!known(peer)) return Status::error;
  auto [route, to] = routes_[peer];
  return relay(route, backend(route).write_with_notification(to, buffer, length, part_descriptor(descriptor, route),
                                                             target, target_offset, notification, context));
}

Status HybridTransport::read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                             const RemoteBuffer& source, std::size_t source_offset, std::uint64_t context) noexcept {
  if (!known(peer)) return Status::error;
  auto [route, from] = routes_[peer];
  return relay(route, backend(route).read(from, buffer, length, part_descriptor(descriptor, route), source,
                                          source_offset, context));
}

std::byte* HybridTransport::map_remote(PeerIndex peer, const RemoteBuffer& remote, std::size_t length) noexcept {
  if (peer >= routes_.size()) return nullptr;
  auto [route, to] = routes_[peer];
  return backend(route).map_remote(to, remote, length);
}

bool HybridTransport::offer_message_from(PeerIndex peer) noexcept {
  if (peer >= routes_.size()) return false;
  auto [route, from] = routes_[peer];
  return backend(route).offer_message_from(from);
}

bool HybridTransport::offers_messages_of(PeerIndex peer) const noexcept {
  if (peer >= routes_.size()) return false;
  auto [route, from] = routes_[peer];
  return backend(route).offers_messages_of(from);
}

std::size_t HybridTransport::poll_backend(Route route, std::span<Completion> out) noexcept {
  std::size_t count = backend(route).poll(out);
  const auto& rename = hybrid_peer_of_[static_cast<std::size_t>(route)];
  for (std::size_t i = 0; i < count; ++i)
    if (out[i].peer != kUnknownPeer) out[i].peer = out[i].peer < rename.size() ? rename[out[i].peer] : kUnknownPeer;
  return count;
}

// Both backends each call, the one polled first alternating, so neither starves.
std::size_t HybridTransport::poll(std::span<Completion> out) noexcept {
  poll_network_first_ = !poll_network_first_;
  Route first = poll_network_first_ ? Route::network : Route::local;
  Route second = poll_network_first_ ? Route::local : Route::network;
  std::size_t count = poll_backend(first, out);
  return count + poll_backend(second, out.subspan(count));
}

}  // namespace tether::transport::hybrid
