// Completion polling: CQ entries become Completions; error entries name peer and cause.
#include <rdma/fi_errno.h>

#include <algorithm>

#include "transport/ofi/ofi_transport.hpp"

namespace tether::transport::ofi {
namespace {

constexpr std::size_t kBatch = 32;

PeerIndex peer_of(fi_addr_t source) noexcept {
  return source == FI_ADDR_NOTAVAIL || source == FI_ADDR_UNSPEC ? kUnknownPeer
                                                                 : static_cast<PeerIndex>(source);
}

}  // namespace

Completion OfiTransport::translate(const fi_cq_data_entry& entry, fi_addr_t source) noexcept {
  Completion completion;
  if ((entry.flags & FI_REMOTE_WRITE) && (entry.flags & FI_REMOTE_CQ_DATA)) {
    completion.kind = CompletionKind::remote_write;
    completion.peer = peer_of(source);
    completion.length = entry.len;
    completion.notification = entry.data;
    return completion;
  }
  auto* operation = static_cast<Operation*>(entry.op_context);
  if (operation->use == OperationUse::notification_receive) return notification_arrived(operation, entry, source);
  if (operation->use == OperationUse::write_then_notify) notify_after_write(*operation);
  completion.kind = operation->kind;
  completion.peer = operation->kind == CompletionKind::receive ? peer_of(source) : operation->peer;
  completion.context = operation->context;
  completion.buffer = operation->buffer;
  completion.length = operation->kind == CompletionKind::receive ? entry.len : operation->length;
  operations_.release(operation);
  return completion;
}

Completion OfiTransport::read_error() noexcept {
  fi_cq_err_entry failure{};
  Completion completion;
  completion.kind = CompletionKind::error;
  if (fi_cq_readerr(cq_, &failure, 0) < 0) {
    completion.error = Errc::transport;
    completion.cause = "fi_cq_readerr returned nothing after FI_EAVAIL";
    return completion;
  }
  completion.provider_errno = failure.err;
  completion.error = errc_of(failure.err);
  completion.cause = libfabric().strerror(failure.err);
  auto* operation = static_cast<Operation*>(failure.op_context);
  if (operation != nullptr && operations_.owns(operation) && operation->use == OperationUse::notification_receive)
    return notification_failed(operation, failure);
  if (operation != nullptr && operations_.owns(operation)) {
    completion.failed_kind = operation->kind;
    completion.peer = operation->peer;
    completion.context = operation->context;
    completion.buffer = operation->buffer;
    completion.length = operation->kind == CompletionKind::receive ? failure.len : operation->length;
    operations_.release(operation);
  } else if (failure.flags & FI_REMOTE_WRITE) {
    completion.failed_kind = CompletionKind::remote_write;
  }
  return completion;
}

std::size_t OfiTransport::poll(std::span<Completion> out) noexcept {
  fi_cq_data_entry entries[kBatch];
  fi_addr_t sources[kBatch];
  std::size_t wanted = std::min(out.size(), kBatch);
  if (wanted == 0) return 0;
  if (!unposted_notification_receives_.empty()) post_kept_notification_receives();
  if (!pending_notifications_.empty()) flush_notifications();
  ssize_t count = fi_cq_readfrom(cq_, entries, wanted, sources);
  if (count > 0) {
    for (ssize_t i = 0; i < count; ++i) out[i] = translate(entries[i], sources[i]);
    return static_cast<std::size_t>(count);
  }
  if (count == -FI_EAGAIN) return 0;
  if (count == -FI_EAVAIL) {
    out[0] = read_error();
    return 1;
  }
  out[0] = Completion{};
  out[0].provider_errno = static_cast<int>(-count);
  out[0].error = Errc::transport;
  out[0].cause = libfabric().strerror(static_cast<int>(-count));
  return 1;
}

}  // namespace tether::transport::ofi
