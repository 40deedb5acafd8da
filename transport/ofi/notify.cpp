// Notifications by send, for providers whose remote CQ data holds fewer than 8 bytes (or
// TETHER_OFI_NOTIFY=send): the write asks for delivery completion, and when it has landed
// the notification follows as a 16-byte tagged message. The target keeps tagged receives
// posted for them and reports each as a remote_write, so callers see what they see with
// CQ data. Tagged and untagged receives never match each other, so callers' messages and
// notifications cannot be confused.
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <cstdlib>

#include "runtime/base/log.hpp"
#include "transport/injected_failures.hpp"
#include "transport/ofi/notify_injection.hpp"
#include "transport/ofi/ofi_transport.hpp"

namespace tether::transport::ofi {
namespace {

constexpr std::uint64_t kNotificationTag = 0x7e7e000000000001ULL;
constexpr std::size_t kNotificationReceives = 64;

InjectedFailures notification_receive_retries;

}  // namespace

void inject_notification_receive_retries(std::uint32_t successes, std::uint32_t failures) noexcept {
  notification_receive_retries.arm(successes, failures);
}

Expected<void> OfiTransport::post_notification_receives() {
  std::size_t bytes = (kNotificationReceives * sizeof(NotificationMessage) + kPageBytes - 1) / kPageBytes * kPageBytes;
  notification_slots_ = static_cast<NotificationMessage*>(std::aligned_alloc(kPageBytes, bytes));
  if (notification_slots_ == nullptr) return make_error(Errc::out_of_memory, "no memory for notification receives", "free memory");
  auto registered = registrar_->register_range(notification_slots_, bytes, Access::all);
  if (!registered) return tl::unexpected(registered.error());
  notification_registration_ = *registered;
  unposted_notification_receives_.reserve(kNotificationReceives);  // keeping one never allocates
  for (std::size_t i = 0; i < kNotificationReceives; ++i) {
    Operation* operation = operations_.acquire(CompletionKind::receive, kUnknownPeer, 0, &notification_slots_[i],
                                               sizeof(NotificationMessage));
    if (operation == nullptr) return make_error(Errc::limit_exceeded, "the operation table is too small", "report this");
    operation->use = OperationUse::notification_receive;
    Status status = post_notification_receive(operation);
    if (status == Status::retry) unposted_notification_receives_.push_back(operation);
    else if (status != Status::posted) return tl::unexpected(last_error_);
  }
  log::info("transport", "{}: notifications travel as tagged sends after their write lands", name_);
  return {};
}

// Status::retry when the provider answers FI_EAGAIN (its receive queue is full for now).
Status OfiTransport::post_notification_receive(Operation* operation) noexcept {
  ssize_t result = notification_receive_retries.take()
                       ? -FI_EAGAIN
                       : fi_trecv(endpoint_, operation->buffer, sizeof(NotificationMessage),
                                  notification_registration_.local_descriptor, FI_ADDR_UNSPEC, kNotificationTag, 0,
                                  operation);
  if (result == 0) return Status::posted;
  if (result == -FI_EAGAIN) return Status::retry;
  return fail(errc_of(static_cast<int>(-result)),
              fmt::format("fi_trecv of a notification receive on {} failed: {}", name_,
                          libfabric().strerror(static_cast<int>(-result))),
              "run with FI_LOG_LEVEL=warn for the provider's reason", static_cast<int>(-result));
}

// Delivery completion even at 0 bytes is not needed: nothing can land after the notification.
Status OfiTransport::post_notifying_write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                                          std::uint64_t address, std::uint64_t key, std::uint64_t notification,
                                          std::uint64_t context) noexcept {
  Operation* operation = operations_.acquire(CompletionKind::write_done, peer, context, const_cast<void*>(buffer), length);
  if (operation == nullptr) return Status::retry;
  operation->use = OperationUse::write_then_notify;
  operation->notification = notification;
  iovec local{const_cast<void*>(buffer), length};
  fi_rma_iov remote{address, length, key};
  fi_msg_rma message{&local, &descriptor, 1, peer, &remote, 1, operation, 0};
  std::uint64_t flags = FI_COMPLETION | (length == 0 ? 0 : FI_DELIVERY_COMPLETE);
  return posted_or_retry(fi_writemsg(endpoint_, &message, flags), operation, "fi_writemsg");
}

// The write landed: its notification goes now, or after those that met back-pressure
// (queued only then, so the common path allocates nothing).
void OfiTransport::notify_after_write(const Operation& operation) noexcept {
  PendingNotification notification{operation.peer, {operation.notification, operation.length}};
  if (pending_notifications_.empty() && try_notify(notification)) return;
  try {
    pending_notifications_.push_back(notification);
  } catch (...) {
    log::error("transport", "{}: no memory to queue a notification to peer {}; it is lost", name_, operation.peer);
  }
}

void OfiTransport::flush_notifications() noexcept {
  while (!pending_notifications_.empty() && try_notify(pending_notifications_.front())) pending_notifications_.pop_front();
}

// False on back-pressure; any other failure is logged and the notification dropped.
bool OfiTransport::try_notify(const PendingNotification& notification) noexcept {
  ssize_t result = fi_tinject(endpoint_, &notification.message, sizeof notification.message, notification.peer,
                              kNotificationTag);
  if (result == -FI_EAGAIN) return false;
  if (result != 0)
    log::error("transport", "{}: the notification to peer {} was not sent: {}", name_, notification.peer,
               libfabric().strerror(static_cast<int>(-result)));
  return true;
}

// A notification receive taken (or failed) goes back at once; one the provider will not take
// now is kept and posted again at the next poll. Dropped, each would leave one receive
// fewer of the 64, and with none left every later notification would wait for ever.
void OfiTransport::post_or_keep_notification_receive(Operation* operation) noexcept {
  Status status = post_notification_receive(operation);
  if (status == Status::retry && unposted_notification_receives_.size() < kNotificationReceives)
    return unposted_notification_receives_.push_back(operation);
  if (status != Status::posted) log::error("transport", "{}: {}", name_, last_error_.message());
}

void OfiTransport::post_kept_notification_receives() noexcept {
  while (!unposted_notification_receives_.empty()) {
    Status status = post_notification_receive(unposted_notification_receives_.back());
    if (status == Status::retry) return;
    if (status != Status::posted) log::error("transport", "{}: {}", name_, last_error_.message());
    unposted_notification_receives_.pop_back();
  }
}

Completion OfiTransport::notification_arrived(Operation* operation, const fi_cq_data_entry& entry,
                                              fi_addr_t source) noexcept {
  Completion completion;
  const auto* message = static_cast<const NotificationMessage*>(operation->buffer);
  if (entry.len != sizeof(NotificationMessage)) {
    completion.kind = CompletionKind::error;
    completion.failed_kind = CompletionKind::remote_write;
    completion.error = Errc::invalid_argument;
    completion.cause = "a notification message of the wrong size: ignored";
  } else {
    completion.kind = CompletionKind::remote_write;
    completion.notification = message->notification;
    completion.length = message->length;
  }
  completion.peer = source == FI_ADDR_NOTAVAIL || source == FI_ADDR_UNSPEC ? kUnknownPeer : static_cast<PeerIndex>(source);
  post_or_keep_notification_receive(operation);
  return completion;
}

Completion OfiTransport::notification_failed(Operation* operation, const fi_cq_err_entry& failure) noexcept {
  Completion completion;
  completion.kind = CompletionKind::error;
  completion.failed_kind = CompletionKind::remote_write;
  completion.error = errc_of(failure.err);
  completion.provider_errno = failure.err;
  completion.cause = failure.err == FI_ETRUNC ? "a notification message longer than 16 bytes: ignored"
                                              : "a notification receive failed";
  if (failure.err != FI_ECANCELED) post_or_keep_notification_receive(operation);
  return completion;
}

void OfiTransport::release_notification_buffers() noexcept {
  if (notification_registration_.handle != nullptr) registrar_->deregister(notification_registration_);
  notification_registration_ = {};
  std::free(notification_slots_);
  notification_slots_ = nullptr;
}

}  // namespace tether::transport::ofi
