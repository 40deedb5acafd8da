// Hybrid's set-up half: opening, node identity, addresses, peers, registration, describe.
#include "transport/hybrid/hybrid_transport.hpp"
#include "transport/hybrid/hybrid_address.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"

namespace tether::transport::hybrid {
namespace {

std::string first_line(const char* path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

std::string namespace_inode(const char* path) {
  struct stat status {};
  return stat(path, &status) == 0 ? std::to_string(status.st_ino) : std::string("?");
}


Expected<Registration> rollback(Registrar& registrar, Registration& done, Error error) {
  registrar.deregister(done);
  return tl::unexpected(std::move(error));
}

}  // namespace

// max_rma_bytes 0 is no limit (shm-own, tcp-own): the other backend's limit applies. Before,
// shm-own's 0 hid the network provider's limit, so rendezvous chunks could outgrow it.
Limits combined_limits(const Limits& a, const Limits& b) noexcept {
  std::size_t rma = a.max_rma_bytes == 0 || b.max_rma_bytes == 0 ? std::max(a.max_rma_bytes, b.max_rma_bytes)
                                                                  : std::min(a.max_rma_bytes, b.max_rma_bytes);
  return Limits{std::min(a.max_message_bytes, b.max_message_bytes), rma, std::min(a.inject_bytes, b.inject_bytes),
                std::min(a.send_queue_depth, b.send_queue_depth),
                std::min(a.receive_queue_depth, b.receive_queue_depth)};
}

std::string node_identity() {
  auto configured = config::Config::global().text("TETHER_NODE_NAME");
  if (configured != "auto" && !configured.empty()) return std::string(configured);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{}/{}/net:{}/pid:{}", host, first_line("/proc/sys/kernel/random/boot_id"),
                     namespace_inode("/proc/self/ns/net"), namespace_inode("/proc/self/ns/pid"));
}

// --- registrar ---------------------------------------------------------------------------

Expected<Registration> HybridRegistrar::register_range(void* address, std::size_t length, Access access) {
  auto both = std::make_unique<HybridRegistration>();
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    auto part = registrars_[i]->register_range(address, length, access);
    if (!part) return i == 0 ? tl::unexpected(part.error()) : rollback(*registrars_[0], both->parts[0], part.error());
    both->parts[i] = *part;
  }
  Registration registration{address, length, 0, both.get(), both.get()};
  both.release();
  return registration;
}

void HybridRegistrar::deregister(const Registration& registration) noexcept {
  auto* both = static_cast<HybridRegistration*>(registration.handle);
  if (both == nullptr) return;
  for (std::size_t i = 0; i < kRouteCount; ++i) registrars_[i]->deregister(both->parts[i]);
  delete both;
}

// --- transport ---------------------------------------------------------------------------

HybridTransport::HybridTransport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> network,
                                 std::string node_identity)
    : backends_{std::move(local), std::move(network)},
      registrar_(backends_[0]->registrar(), backends_[1]->registrar()),
      node_identity_(std::move(node_identity)),
      name_(fmt::format("hybrid({}+{})", backends_[0]->name(), backends_[1]->name())),
      limits_(combined_limits(backends_[0]->limits(), backends_[1]->limits())) {}

HybridTransport::~HybridTransport() = default;

Expected<std::unique_ptr<Transport>> HybridTransport::open(std::unique_ptr<Transport> local,
                                                           std::unique_ptr<Transport> network,
                                                           std::string node_identity) {
  if (node_identity.size() > 0xffff)
    return make_error(Errc::invalid_argument, fmt::format("a {}-byte node name", node_identity.size()),
                      "set TETHER_NODE_NAME to a shorter name");
  auto made = std::unique_ptr<Transport>(new HybridTransport(std::move(local), std::move(network), node_identity));
  log::info("transport", "{} on node '{}'", made->name(), node_identity);
  return made;
}

std::span<const std::byte> HybridTransport::address() const noexcept {
  // open() refused identities longer than the header holds; backend addresses are short.
  (void)encode_address({node_identity_, backend(Route::local).address(), backend(Route::network).address()}, address_);
  return address_;
}

Expected<PeerIndex> HybridTransport::insert_peer(std::span<const std::byte> address) {
  auto parts = parse_address(address);
  if (!parts) return tl::unexpected(parts.error());
  bool same_node = parts->identity == node_identity_;
  Route route = same_node ? Route::local : Route::network;
  auto inserted = backend(route).insert_peer(same_node ? parts->local : parts->network);
  if (!inserted) return inserted;
  auto& reverse = hybrid_peer_of_[static_cast<std::size_t>(route)];
  if (reverse.size() <= *inserted) reverse.resize(*inserted + 1, kUnknownPeer);
  reverse[*inserted] = static_cast<PeerIndex>(routes_.size());
  routes_.push_back({route, *inserted});
  return reverse[*inserted];
}

std::string_view HybridTransport::peer_transport_name(PeerIndex peer) const noexcept {
  if (peer >= routes_.size()) return name_;
  return backend(routes_[peer].route).name();
}

bool HybridTransport::delivers_in_order(PeerIndex peer) const noexcept {
  if (peer >= routes_.size()) return false;
  return backend(routes_[peer].route).delivers_in_order(routes_[peer].backend_peer);
}

bool HybridTransport::maps_peer_pool(PeerIndex peer) const noexcept {
  if (peer >= routes_.size()) return false;
  return backend(routes_[peer].route).maps_peer_pool(routes_[peer].backend_peer);
}

bool HybridTransport::sends_beat_small_writes(PeerIndex peer) const noexcept {
  if (peer >= routes_.size()) return false;
  return backend(routes_[peer].route).sends_beat_small_writes(routes_[peer].backend_peer);
}

Expected<void> HybridTransport::attach_pool() {
  for (auto& part : backends_) {
    auto attached = part->attach_pool();
    if (!attached) return attached;
  }
  return {};
}

void HybridTransport::detach_pool() noexcept {
  for (auto& part : backends_) part->detach_pool();
}

RemoteBuffer HybridTransport::describe_for(PeerIndex peer, const Registration& registration, const void* address,
                                           std::size_t length) const noexcept {
  auto* both = static_cast<const HybridRegistration*>(registration.handle);
  Route route = peer < routes_.size() ? routes_[peer].route : Route::network;
  if (both == nullptr) return describe(registration, address, length);
  return describe(both->parts[static_cast<std::size_t>(route)], address, length);
}

Expected<RemoteBuffer> HybridTransport::describe_pool_buffer_for(PeerIndex peer, const void* address,
                                                                 std::size_t length) const {
  Route route = peer < routes_.size() ? routes_[peer].route : Route::network;
  return backend(route).describe_pool_buffer(address, length);
}

Expected<ExposedRange> HybridTransport::expose_pool_range(PeerIndex peer, const void* address, std::size_t length,
                                                          Access access, KeyScope scope) {
  if (peer >= routes_.size())
    return make_error(Errc::invalid_argument, fmt::format("peer {} of {} is not inserted", peer, routes_.size()),
                      "insert the peer before handing it keys");
  const PeerRoute& route = routes_[peer];
  return backend(route.route).expose_pool_range(route.backend_peer, address, length, access, scope);
}

KeyStats HybridTransport::key_stats() const noexcept {
  KeyStats local = backend(Route::local).key_stats();
  KeyStats network = backend(Route::network).key_stats();
  return KeyStats{local.range_registrations + network.range_registrations,
                  local.range_releases + network.range_releases, local.arena_keys + network.arena_keys};
}

}  // namespace tether::transport::hybrid
