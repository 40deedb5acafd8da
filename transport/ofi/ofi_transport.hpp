// The libfabric backend: one fabric, domain, address vector (FI_AV_TABLE, so fi_addr_t
// equals PeerIndex), completion queue and FI_EP_RDM endpoint per OfiTransport.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "transport/ofi/libfabric.hpp"
#include "transport/op_table.hpp"
#include "transport/transport.hpp"

namespace tether::transport::ofi {

// fi_mr_reg as a pool registrar; honours FI_MR_PROV_KEY and FI_MR_ENDPOINT.
class OfiRegistrar final : public Registrar {
 public:
  OfiRegistrar(std::string name, fid_domain* domain, fid_ep* endpoint, std::uint64_t mr_mode)
      : name_(std::move(name)), domain_(domain), endpoint_(endpoint), mr_mode_(mr_mode) {}
  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length,
                                                      Access access) override;
  void deregister(const Registration& registration) noexcept override;

 private:
  Expected<void> bind_to_endpoint(fid_mr* region, void* address, std::size_t length);

  std::string name_;
  fid_domain* domain_;
  fid_ep* endpoint_;
  std::uint64_t mr_mode_;
  std::mutex mutex_;
  std::atomic<std::uint64_t> next_key_{1};
};

class OfiTransport final : public Transport {
 public:
  // How write_with_notification reaches the target: as remote CQ data, or as a tagged
  // send posted once the write has landed (providers with under 8 bytes of CQ data).
  enum class Notify : std::uint8_t { automatic, cq_data, send };

  // Opens everything for `provider` ("shm", "tcp;ofi_rxm", ...) on `domain` ("" = any).
  static Expected<std::unique_ptr<Transport>> open(const std::string& provider,
                                                   const std::string& domain,
                                                   Notify notify = Notify::automatic);
  ~OfiTransport() override;

  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  [[nodiscard]] const Limits& limits() const noexcept override { return limits_; }
  [[nodiscard]] Registrar& registrar() noexcept override { return *registrar_; }
  [[nodiscard]] bool range_keys_are_cheap() const noexcept override { return software_provider_; }
  [[nodiscard]] bool sends_beat_small_writes(PeerIndex) const noexcept override { return software_provider_; }
  [[nodiscard]] std::span<const std::byte> address() const noexcept override { return address_; }
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
  explicit OfiTransport(fi_info* info);
  Expected<void> open_resources();
  Expected<void> open_endpoint();
  Expected<void> read_address();
  void close_resources() noexcept;

  // Post-path helpers (post.cpp).
  bool check_peer(PeerIndex peer) noexcept;
  bool resolve_descriptor(const void* buffer, void*& descriptor) noexcept;
  bool rma_target(PeerIndex peer, const RemoteBuffer& remote, std::size_t offset,
                  std::size_t length, std::uint64_t& address) noexcept;
  Status posted_or_retry(ssize_t result, Operation* operation, const char* call) noexcept;
  Status post_write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                    const RemoteBuffer& target, std::size_t target_offset, bool notify,
                    std::uint64_t notification, std::uint64_t context) noexcept;

  // Completion helpers (poll.cpp).
  Completion translate(const fi_cq_data_entry& entry, fi_addr_t source) noexcept;
  Completion read_error() noexcept;

  // Notifications by send (notify.cpp).
  struct NotificationMessage {
    std::uint64_t notification;
    std::uint64_t length;
  };
  struct PendingNotification {
    PeerIndex peer;
    NotificationMessage message;
  };
  Expected<void> post_notification_receives();
  Status post_notification_receive(Operation* operation) noexcept;
  void post_or_keep_notification_receive(Operation* operation) noexcept;
  void post_kept_notification_receives() noexcept;
  Status post_notifying_write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                              std::uint64_t address, std::uint64_t key, std::uint64_t notification,
                              std::uint64_t context) noexcept;
  void notify_after_write(const Operation& operation) noexcept;
  void flush_notifications() noexcept;
  bool try_notify(const PendingNotification& notification) noexcept;
  Completion notification_arrived(Operation* operation, const fi_cq_data_entry& entry, fi_addr_t source) noexcept;
  Completion notification_failed(Operation* operation, const fi_cq_err_entry& failure) noexcept;
  void release_notification_buffers() noexcept;

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* endpoint_ = nullptr;
  std::unique_ptr<OfiRegistrar> registrar_;
  std::string name_;
  bool software_provider_ = false;  // tcp, shm, udp, sockets: registration pins nothing
  Limits limits_;
  std::vector<std::byte> address_;
  std::size_t address_bytes_ = 0;
  PeerIndex peer_count_ = 0;
  bool needs_local_descriptor_ = false;
  bool virtual_addressing_ = false;
  bool notify_by_send_ = false;
  NotificationMessage* notification_slots_ = nullptr;  // page-aligned, registered
  Registration notification_registration_{};
  std::deque<PendingNotification> pending_notifications_;  // met back-pressure, in order
  std::vector<Operation*> unposted_notification_receives_;  // answered FI_EAGAIN: posted at the next poll
  OperationTable operations_{1};
};

// Provider choice: TETHER_OFI_PROVIDER, or the first of verbs/efa/cxi with RDM, else
// tcp;ofi_rxm (also when libfabric cannot be loaded). `why` says which rule picked it.
[[nodiscard]] std::string choose_provider(std::string_view requested, std::string& why);
[[nodiscard]] Errc errc_of(int provider_errno) noexcept;

}  // namespace tether::transport::ofi
