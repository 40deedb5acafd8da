// The rdma-core verbs backend: RC queue pairs (one per peer), one completion queue, a
// shared receive queue for eager traffic, ibv_reg_mr as the registrar.
#pragma once

#include <infiniband/verbs.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/op_table.hpp"
#include "transport/transport.hpp"

namespace tether::transport::verbs {

// What address() returns: enough to bring an RC queue pair to RTR. Append fields only.
struct WireAddress {
  std::uint8_t gid[16];
  std::uint32_t qp_number;
  std::uint32_t packet_sequence;
  std::uint16_t lid;
  std::uint8_t port;
  std::uint8_t mtu;  // enum ibv_mtu
};

class VerbsRegistrar final : public Registrar {
 public:
  VerbsRegistrar(std::string name, ibv_pd* protection_domain)
      : name_(std::move(name)), protection_domain_(protection_domain) {}
  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length,
                                                      Access access) override;
  void deregister(const Registration& registration) noexcept override;

 private:
  std::string name_;
  ibv_pd* protection_domain_;
};

class VerbsTransport final : public Transport {
 public:
  static Expected<std::unique_ptr<Transport>> open(const std::string& device_name);
  ~VerbsTransport() override;

  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  [[nodiscard]] const Limits& limits() const noexcept override { return limits_; }
  [[nodiscard]] Registrar& registrar() noexcept override { return *registrar_; }
  // Names the queue pair the next insert_peer connects; changes after each insert_peer,
  // so each pair of peers exchanges fresh addresses (RC needs one queue pair per peer).
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
  [[nodiscard]] std::size_t poll(std::span<Completion> out) noexcept override;

 private:
  VerbsTransport() = default;
  Expected<void> open_device(ibv_device* device);
  Expected<void> create_spare_queue_pair();
  Expected<void> connect(ibv_qp* queue_pair, const WireAddress& remote);
  void close_resources() noexcept;

  std::uint32_t local_key(const void* buffer, void* descriptor) noexcept;
  Status post_one(PeerIndex peer, Operation* operation, const void* buffer, std::size_t length,
                  void* descriptor, ibv_send_wr& request) noexcept;
  Status post_to_peer(PeerIndex peer, ibv_send_wr& request, Operation* operation) noexcept;
  Status check_rma(PeerIndex peer, const RemoteBuffer& remote, std::size_t offset, std::size_t length) noexcept;
  Status post_notifying_write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                              const RemoteBuffer& target, std::size_t offset, std::uint64_t notification,
                              std::uint64_t context) noexcept;
  Completion notification_message(const ibv_wc& work, Operation* operation, PeerIndex peer) noexcept;
  Status post_rma(PeerIndex peer, ibv_wr_opcode opcode, void* buffer, std::size_t length,
                  void* descriptor, const RemoteBuffer& remote, std::size_t offset,
                  std::uint32_t immediate, CompletionKind kind, std::uint64_t context) noexcept;
  Completion translate(const ibv_wc& work) noexcept;
  void repost(Operation* operation) noexcept;

  ibv_context* context_ = nullptr;
  ibv_pd* protection_domain_ = nullptr;
  ibv_cq* completion_queue_ = nullptr;
  ibv_srq* shared_receive_queue_ = nullptr;
  ibv_qp* spare_queue_pair_ = nullptr;
  std::vector<ibv_qp*> peers_;
  std::unordered_map<std::uint32_t, PeerIndex> peer_of_queue_pair_;
  std::unique_ptr<VerbsRegistrar> registrar_;
  std::string name_;
  Limits limits_;
  WireAddress address_{};
  ibv_port_attr port_{};
  std::uint8_t port_number_ = 1;
  OperationTable operations_{1};
};

}  // namespace tether::transport::verbs
