// The transport of jobs that span nodes: peers on this node go over a shared-memory
// backend (shm-own or ofi:shm), the others over the network backend (ofi, verbs).
// Each peer's address carries a node identity; insert_peer compares it with ours and
// routes the peer to one backend for good. See transport/hybrid/README.md.
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/transport.hpp"

namespace tether::transport::hybrid {

enum class Route : std::uint8_t { local = 0, network = 1 };
inline constexpr std::size_t kRouteCount = 2;

// What the job may ask of both backends: the stricter limit of each kind.
[[nodiscard]] Limits combined_limits(const Limits& a, const Limits& b) noexcept;

// What hybrid's registrar hands out: one registration per backend. Registration's
// local_descriptor and handle both point at it.
struct HybridRegistration {
  std::array<Registration, kRouteCount> parts;
};

// Registers with both backends' registrars. Thread-safe (both are).
class HybridRegistrar final : public Registrar {
 public:
  HybridRegistrar(Registrar& local, Registrar& network) : registrars_{&local, &network} {}
  [[nodiscard]] std::string_view name() const noexcept override { return "hybrid"; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length, Access access) override;
  void deregister(const Registration& registration) noexcept override;

 private:
  std::array<Registrar*, kRouteCount> registrars_;
};

// Where a hybrid PeerIndex goes.
struct PeerRoute {
  Route route;
  PeerIndex backend_peer;
};

class HybridTransport final : public Transport {
 public:
  // `node_identity`: peers whose addresses carry the same string share this node.
  static Expected<std::unique_ptr<Transport>> open(std::unique_ptr<Transport> local,
                                                   std::unique_ptr<Transport> network,
                                                   std::string node_identity);
  ~HybridTransport() override;

  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  [[nodiscard]] std::string_view peer_transport_name(PeerIndex peer) const noexcept override;
  [[nodiscard]] bool sends_beat_small_writes(PeerIndex peer) const noexcept override;
  [[nodiscard]] bool delivers_in_order(PeerIndex peer) const noexcept override;
  [[nodiscard]] bool holds_unsent() const noexcept override {
    return std::any_of(backends_.begin(), backends_.end(), [](const auto& backend) { return backend && backend->holds_unsent(); });
  }
  [[nodiscard]] bool maps_peer_pool(PeerIndex peer) const noexcept override;
  [[nodiscard]] const Limits& limits() const noexcept override { return limits_; }
  [[nodiscard]] Registrar& registrar() noexcept override { return registrar_; }
  [[nodiscard]] std::span<const std::byte> address() const noexcept override;
  [[nodiscard]] Expected<PeerIndex> insert_peer(std::span<const std::byte> address) override;

  [[nodiscard]] Status post_receive(void* buffer, std::size_t length, void* descriptor,
                                    std::uint64_t context) noexcept override;
  [[nodiscard]] Status send(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                            std::uint64_t context) noexcept override;
  [[nodiscard]] Status write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                             const RemoteBuffer& target, std::size_t target_offset,
                             std::uint64_t context) noexcept override;
  [[nodiscard]] Status write_with_notification(PeerIndex peer, const void* buffer, std::size_t length,
                                               void* descriptor, const RemoteBuffer& target,
                                               std::size_t target_offset, std::uint64_t notification,
                                               std::uint64_t context) noexcept override;
  [[nodiscard]] Status read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                            const RemoteBuffer& source, std::size_t source_offset,
                            std::uint64_t context) noexcept override;
  [[nodiscard]] std::byte* map_remote(PeerIndex peer, const RemoteBuffer& remote, std::size_t length) noexcept override;
  [[nodiscard]] std::size_t poll(std::span<Completion> out) noexcept override;
  void read_messages_in_place(MessageReader* reader) noexcept override {
    for (auto& backend : backends_) backend->read_messages_in_place(reader);
  }
  [[nodiscard]] bool offer_message_from(PeerIndex peer) noexcept override;
  [[nodiscard]] bool offers_messages_of(PeerIndex peer) const noexcept override;

  [[nodiscard]] Expected<void> attach_pool() override;
  void detach_pool() noexcept override;
  [[nodiscard]] RemoteBuffer describe_for(PeerIndex peer, const Registration& registration, const void* address,
                                          std::size_t length) const noexcept override;
  [[nodiscard]] Expected<RemoteBuffer> describe_pool_buffer_for(PeerIndex peer, const void* address,
                                                                std::size_t length) const override;
  // The backend that carries `peer` registers (or not) the range for it alone.
  [[nodiscard]] Expected<ExposedRange> expose_pool_range(PeerIndex peer, const void* address, std::size_t length,
                                                         Access access, KeyScope scope) override;
  [[nodiscard]] KeyStats key_stats() const noexcept override;

 private:
  HybridTransport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> network, std::string node_identity);

  [[nodiscard]] bool known(PeerIndex peer) noexcept;
  [[nodiscard]] Transport& backend(Route route) const noexcept { return *backends_[static_cast<std::size_t>(route)]; }
  [[nodiscard]] static void* part_descriptor(void* descriptor, Route route) noexcept;
  [[nodiscard]] Status relay(Route route, Status status) noexcept;
  std::size_t poll_backend(Route route, std::span<Completion> out) noexcept;

  std::array<std::unique_ptr<Transport>, kRouteCount> backends_;
  HybridRegistrar registrar_;
  std::string node_identity_;
  std::string name_;
  Limits limits_;
  mutable std::vector<std::byte> address_;  // rebuilt on each call: verbs' address changes per peer
  std::vector<PeerRoute> routes_;           // by hybrid PeerIndex
  std::array<std::vector<PeerIndex>, kRouteCount> hybrid_peer_of_;  // by backend PeerIndex
  std::unordered_map<void*, Route> receive_route_;                  // posted receive buffers
  std::size_t receives_posted_ = 0;
  bool poll_network_first_ = false;
};

// This process's node when no launcher said: TETHER_NODE_NAME when set, else the host
// name, boot id and network and pid namespaces (processes that can map each other's
// memory and share a network stack). The runtime passes PMIx's node instead.
[[nodiscard]] std::string node_identity();

}  // namespace tether::transport::hybrid
