// Posting operations: receive, send (inject when small), RMA write, write with
// notification, read. Every provider EAGAIN and a full operation table become retry.
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "transport/ofi/ofi_transport.hpp"

namespace tether::transport::ofi {

bool OfiTransport::check_peer(PeerIndex peer) noexcept {
  if (peer < peer_count_) return true;
  (void)fail(Errc::invalid_argument, fmt::format("peer {} was never inserted ({} peers)", peer, peer_count_),
       "insert the peer's address with insert_peer first");
  return false;
}

bool OfiTransport::resolve_descriptor(const void* buffer, void*& descriptor) noexcept {
  if (descriptor != nullptr || !needs_local_descriptor_) return true;
  descriptor = pool_descriptor(buffer);
  if (descriptor != nullptr) return true;
  (void)fail(Errc::invalid_argument,
       fmt::format("{} needs a registered local buffer (FI_MR_LOCAL) and {} is not in an attached "
                   "pool arena", name_, buffer),
       "use pinned_alloc memory after attach_pool(), or pass the descriptor of a registration");
  return false;
}

bool OfiTransport::rma_target(PeerIndex peer, const RemoteBuffer& remote, std::size_t offset,
                              std::size_t length, std::uint64_t& address) noexcept {
  if (!check_peer(peer)) return false;
  if (remote.length != 0 && (offset > remote.length || length > remote.length - offset)) {
    (void)fail(Errc::invalid_argument,
         fmt::format("RMA of {} bytes at offset {} runs past the {}-byte remote buffer", length, offset,
                     remote.length),
         "keep RMA inside the RemoteBuffer the peer described");
    return false;
  }
  std::uint64_t base = virtual_addressing_ ? remote.address : remote.address - remote.registration_base;
  address = base + offset;
  return true;
}

Status OfiTransport::posted_or_retry(ssize_t result, Operation* operation, const char* call) noexcept {
  if (result == 0) return Status::posted;
  operations_.release(operation);
  if (result == -FI_EAGAIN) return Status::retry;
  return fail(errc_of(static_cast<int>(-result)),
              fmt::format("{} on {} failed: {}", call, name_, libfabric().strerror(static_cast<int>(-result))),
              "run with FI_LOG_LEVEL=warn for the provider's reason", static_cast<int>(-result));
}

Status OfiTransport::post_receive(void* buffer, std::size_t length, void* descriptor,
                                  std::uint64_t context) noexcept {
  if (!resolve_descriptor(buffer, descriptor)) return Status::error;
  Operation* operation = operations_.acquire(CompletionKind::receive, kUnknownPeer, context, buffer, length);
  if (operation == nullptr) return Status::retry;
  return posted_or_retry(fi_recv(endpoint_, buffer, length, descriptor, FI_ADDR_UNSPEC, operation),
                         operation, "fi_recv");
}

Status OfiTransport::send(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                          std::uint64_t context) noexcept {
  if (!check_peer(peer)) return Status::error;
  if (length <= limits_.inject_bytes) {
    ssize_t result = fi_inject(endpoint_, buffer, length, peer);
    if (result == 0) return Status::done;
    if (result == -FI_EAGAIN) return Status::retry;
    return fail(errc_of(static_cast<int>(-result)),
                fmt::format("fi_inject on {} failed: {}", name_, libfabric().strerror(static_cast<int>(-result))),
                "run with FI_LOG_LEVEL=warn for the provider's reason", static_cast<int>(-result));
  }
  if (!resolve_descriptor(buffer, descriptor)) return Status::error;
  Operation* operation = operations_.acquire(CompletionKind::send_done, peer, context,
                                             const_cast<void*>(buffer), length);
  if (operation == nullptr) return Status::retry;
  return posted_or_retry(fi_send(endpoint_, buffer, length, descriptor, peer, operation), operation,
                         "fi_send");
}

Status OfiTransport::post_write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                                const RemoteBuffer& target, std::size_t target_offset, bool notify,
                                std::uint64_t notification, std::uint64_t context) noexcept {
  std::uint64_t address = 0;
  if (!rma_target(peer, target, target_offset, length, address)) return Status::error;
  if (!resolve_descriptor(buffer, descriptor)) return Status::error;
  if (notify && notify_by_send_)
    return post_notifying_write(peer, buffer, length, descriptor, address, target.key, notification, context);
  Operation* operation = operations_.acquire(CompletionKind::write_done, peer, context,
                                             const_cast<void*>(buffer), length);
  if (operation == nullptr) return Status::retry;
  iovec local{const_cast<void*>(buffer), length};
  fi_rma_iov remote{address, length, target.key};
  fi_msg_rma message{&local, &descriptor, 1, peer, &remote, 1, operation, notification};
  // Delivery complete: an invalid key or range at the target fails this operation
  // instead of completing it locally and being dropped over there. shm (1.17) never
  // completes a zero-byte write asked for delivery completion; there is nothing to lose.
  std::uint64_t completion = length == 0 ? 0 : FI_DELIVERY_COMPLETE;
  std::uint64_t flags = FI_COMPLETION | completion | (notify ? FI_REMOTE_CQ_DATA : 0);
  ssize_t result = fi_writemsg(endpoint_, &message, flags);
  return posted_or_retry(result, operation, "fi_writemsg");
}

Status OfiTransport::write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                           const RemoteBuffer& target, std::size_t target_offset,
                           std::uint64_t context) noexcept {
  return post_write(peer, buffer, length, descriptor, target, target_offset, false, 0, context);
}

Status OfiTransport::write_with_notification(PeerIndex peer, const void* buffer, std::size_t length,
                                             void* descriptor, const RemoteBuffer& target,
                                             std::size_t target_offset, std::uint64_t notification,
                                             std::uint64_t context) noexcept {
  return post_write(peer, buffer, length, descriptor, target, target_offset, true, notification, context);
}

Status OfiTransport::read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                          const RemoteBuffer& source, std::size_t source_offset,
                          std::uint64_t context) noexcept {
  std::uint64_t address = 0;
  if (!rma_target(peer, source, source_offset, length, address)) return Status::error;
  if (!resolve_descriptor(buffer, descriptor)) return Status::error;
  Operation* operation = operations_.acquire(CompletionKind::read_done, peer, context, buffer, length);
  if (operation == nullptr) return Status::retry;
  return posted_or_retry(fi_read(endpoint_, buffer, length, descriptor, peer, address, source.key, operation),
                         operation, "fi_read");
}

}  // namespace tether::transport::ofi
