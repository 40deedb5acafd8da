// Posting and polling on verbs. RDMA write-with-immediate consumes a shared-receive-queue
// buffer at the target; poll reposts that buffer at once. Notifications that do not fit
// the 32-bit immediate follow their write as a send-with-immediate on the same RC queue
// pair (executed in order at the target), marked by kNotificationImmediate.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/verbs/verbs_transport.hpp"

namespace tether::transport::verbs {
namespace {

constexpr std::size_t kBatch = 32;
constexpr std::uint32_t kNotificationImmediate = 0xffffffffU;

struct NotificationMessage {
  std::uint64_t notification;
  std::uint64_t length;
};

Errc errc_of(ibv_wc_status status) noexcept {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR: case IBV_WC_RNR_RETRY_EXC_ERR: case IBV_WC_REM_ABORT_ERR:
      return Errc::peer_unreachable;
    case IBV_WC_REM_ACCESS_ERR: case IBV_WC_LOC_PROT_ERR: case IBV_WC_REM_INV_REQ_ERR:
      return Errc::invalid_argument;
    case IBV_WC_LOC_LEN_ERR: return Errc::truncated;
    default: return Errc::transport;
  }
}

}  // namespace

std::uint32_t VerbsTransport::local_key(const void* buffer, void* descriptor) noexcept {
  if (descriptor == nullptr) descriptor = pool_descriptor(buffer);
  return descriptor ? static_cast<ibv_mr*>(descriptor)->lkey : 0;
}

Status VerbsTransport::post_to_peer(PeerIndex peer, ibv_send_wr& request, Operation* operation) noexcept {
  ibv_send_wr* bad = nullptr;
  int result = ibv_post_send(peers_[peer], &request, &bad);
  if (result == 0) return Status::posted;
  operations_.release(operation);
  if (result == ENOMEM) return Status::retry;
  return fail(Errc::transport, fmt::format("ibv_post_send on {} failed: {}", name_, std::strerror(result)),
              "check the queue pair state (ibv_devinfo -v)", result);
}

Status VerbsTransport::post_receive(void* buffer, std::size_t length, void* descriptor,
                                    std::uint64_t context) noexcept {
  Operation* operation = operations_.acquire(CompletionKind::receive, kUnknownPeer, context, buffer, length);
  if (operation == nullptr) return Status::retry;
  ibv_sge segment{reinterpret_cast<std::uint64_t>(buffer), static_cast<std::uint32_t>(length),
                  local_key(buffer, descriptor)};
  ibv_recv_wr request{};
  request.wr_id = reinterpret_cast<std::uint64_t>(operation);
  request.sg_list = &segment;
  request.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int result = ibv_post_srq_recv(shared_receive_queue_, &request, &bad);
  if (result == 0) return Status::posted;
  operations_.release(operation);
  if (result == ENOMEM) return Status::retry;
  return fail(Errc::transport, fmt::format("ibv_post_srq_recv on {} failed: {}", name_, std::strerror(result)),
              "check the shared receive queue limits (ibv_devinfo -v)", result);
}

Status VerbsTransport::send(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                            std::uint64_t context) noexcept {
  if (peer >= peers_.size())
    return fail(Errc::invalid_argument, fmt::format("peer {} was never inserted", peer), "call insert_peer first");
  Operation* operation = operations_.acquire(CompletionKind::send_done, peer, context,
                                             const_cast<void*>(buffer), length);
  if (operation == nullptr) return Status::retry;
  ibv_send_wr request{};
  request.opcode = IBV_WR_SEND;
  request.send_flags = length <= 64 ? IBV_SEND_INLINE : 0;
  return post_one(peer, operation, buffer, length, descriptor, request);
}

Status VerbsTransport::check_rma(PeerIndex peer, const RemoteBuffer& remote, std::size_t offset,
                                 std::size_t length) noexcept {
  if (peer >= peers_.size())
    return fail(Errc::invalid_argument, fmt::format("peer {} was never inserted", peer), "call insert_peer first");
  if (remote.length != 0 && (offset > remote.length || length > remote.length - offset))
    return fail(Errc::invalid_argument,
                fmt::format("RMA of {} bytes at offset {} runs past the {}-byte remote buffer", length,
                            offset, remote.length),
                "keep RMA inside the RemoteBuffer the peer described");
  return Status::done;
}

Status VerbsTransport::post_rma(PeerIndex peer, ibv_wr_opcode opcode, void* buffer, std::size_t length,
                                void* descriptor, const RemoteBuffer& remote, std::size_t offset,
                                std::uint32_t immediate, CompletionKind kind, std::uint64_t context) noexcept {
  if (check_rma(peer, remote, offset, length) == Status::error) return Status::error;
  Operation* operation = operations_.acquire(kind, peer, context, buffer, length);
  if (operation == nullptr) return Status::retry;
  ibv_send_wr request{};
  request.opcode = opcode;
  request.imm_data = htonl(immediate);
  request.wr.rdma.remote_addr = remote.address + offset;
  request.wr.rdma.rkey = static_cast<std::uint32_t>(remote.key);
  return post_one(peer, operation, buffer, length, descriptor, request);
}

// Adds the one scatter entry, the operation id and a signalled completion to `request`.
Status VerbsTransport::post_one(PeerIndex peer, Operation* operation, const void* buffer, std::size_t length,
                                void* descriptor, ibv_send_wr& request) noexcept {
  ibv_sge segment{reinterpret_cast<std::uint64_t>(buffer), static_cast<std::uint32_t>(length),
                  local_key(buffer, descriptor)};
  request.wr_id = reinterpret_cast<std::uint64_t>(operation);
  request.sg_list = &segment;
  request.num_sge = length ? 1 : 0;
  request.send_flags |= IBV_SEND_SIGNALED;
  return post_to_peer(peer, request, operation);
}

Status VerbsTransport::write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                             const RemoteBuffer& target, std::size_t target_offset,
                             std::uint64_t context) noexcept {
  return post_rma(peer, IBV_WR_RDMA_WRITE, const_cast<void*>(buffer), length, descriptor, target,
                  target_offset, 0, CompletionKind::write_done, context);
}

Status VerbsTransport::write_with_notification(PeerIndex peer, const void* buffer, std::size_t length,
                                               void* descriptor, const RemoteBuffer& target,
                                               std::size_t target_offset, std::uint64_t notification,
                                               std::uint64_t context) noexcept {
  if (notification >= kNotificationImmediate)
    return post_notifying_write(peer, buffer, length, descriptor, target, target_offset, notification, context);
  return post_rma(peer, IBV_WR_RDMA_WRITE_WITH_IMM, const_cast<void*>(buffer), length, descriptor, target,
                  target_offset, static_cast<std::uint32_t>(notification), CompletionKind::write_done, context);
}

// An unsignalled RDMA write chained to a signalled, inlined send-with-immediate that
// carries the notification; the operation completes when the send does.
Status VerbsTransport::post_notifying_write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                                            const RemoteBuffer& target, std::size_t offset,
                                            std::uint64_t notification, std::uint64_t context) noexcept {
  if (check_rma(peer, target, offset, length) == Status::error) return Status::error;
  Operation* operation = operations_.acquire(CompletionKind::write_done, peer, context, const_cast<void*>(buffer), length);
  if (operation == nullptr) return Status::retry;
  ibv_sge data{reinterpret_cast<std::uint64_t>(buffer), static_cast<std::uint32_t>(length), local_key(buffer, descriptor)};
  NotificationMessage message{notification, length};
  ibv_sge note{reinterpret_cast<std::uint64_t>(&message), sizeof message, 0};
  ibv_send_wr notify{};
  notify.wr_id = reinterpret_cast<std::uint64_t>(operation);
  notify.opcode = IBV_WR_SEND_WITH_IMM;
  notify.imm_data = htonl(kNotificationImmediate);
  notify.sg_list = &note;
  notify.num_sge = 1;
  notify.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  ibv_send_wr write{};
  write.opcode = IBV_WR_RDMA_WRITE;
  write.sg_list = &data;
  write.num_sge = length ? 1 : 0;
  write.wr.rdma.remote_addr = target.address + offset;
  write.wr.rdma.rkey = static_cast<std::uint32_t>(target.key);
  write.next = &notify;
  return post_to_peer(peer, write, operation);
}

Status VerbsTransport::read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                            const RemoteBuffer& source, std::size_t source_offset,
                            std::uint64_t context) noexcept {
  return post_rma(peer, IBV_WR_RDMA_READ, buffer, length, descriptor, source, source_offset, 0,
                  CompletionKind::read_done, context);
}

void VerbsTransport::repost(Operation* operation) noexcept {
  void* buffer = operation->buffer;
  std::size_t length = operation->length;
  std::uint64_t context = operation->context;
  operations_.release(operation);
  (void)post_receive(buffer, length, nullptr, context);
}

Completion VerbsTransport::translate(const ibv_wc& work) noexcept {
  auto* operation = reinterpret_cast<Operation*>(work.wr_id);
  auto source = peer_of_queue_pair_.find(work.qp_num);
  PeerIndex peer = source == peer_of_queue_pair_.end() ? kUnknownPeer : source->second;
  Completion completion;
  if (work.status != IBV_WC_SUCCESS) {
    completion.kind = CompletionKind::error;
    completion.failed_kind = operation->kind;
    completion.error = errc_of(work.status);
    completion.provider_errno = work.vendor_err;
    completion.cause = ibv_wc_status_str(work.status);
    completion.peer = operation->peer == kUnknownPeer ? peer : operation->peer;
    completion.context = operation->context;
    completion.buffer = operation->buffer;
    operations_.release(operation);
    return completion;
  }
  if (work.opcode == IBV_WC_RECV && (work.wc_flags & IBV_WC_WITH_IMM) && ntohl(work.imm_data) == kNotificationImmediate)
    return notification_message(work, operation, peer);
  if (work.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    completion.kind = CompletionKind::remote_write;
    completion.peer = peer;
    completion.length = work.byte_len;
    completion.notification = ntohl(work.imm_data);
    repost(operation);
    return completion;
  }
  completion.kind = operation->kind;
  completion.peer = operation->kind == CompletionKind::receive ? peer : operation->peer;
  completion.context = operation->context;
  completion.buffer = operation->buffer;
  completion.length = operation->kind == CompletionKind::receive ? work.byte_len : operation->length;
  operations_.release(operation);
  return completion;
}

// A notification that followed its write as a message: reported as the write's arrival.
Completion VerbsTransport::notification_message(const ibv_wc& work, Operation* operation, PeerIndex peer) noexcept {
  Completion completion;
  completion.peer = peer;
  NotificationMessage message{};
  if (work.byte_len == sizeof message) {
    std::memcpy(&message, operation->buffer, sizeof message);
    completion.kind = CompletionKind::remote_write;
    completion.notification = message.notification;
    completion.length = message.length;
  } else {
    completion.kind = CompletionKind::error;
    completion.failed_kind = CompletionKind::remote_write;
    completion.error = Errc::invalid_argument;
    completion.cause = "a notification message of the wrong size: ignored";
  }
  repost(operation);
  return completion;
}

std::size_t VerbsTransport::poll(std::span<Completion> out) noexcept {
  ibv_wc work[kBatch];
  int wanted = static_cast<int>(std::min(out.size(), kBatch));
  int count = ibv_poll_cq(completion_queue_, wanted, work);
  if (count <= 0) return 0;
  for (int i = 0; i < count; ++i) out[i] = translate(work[i]);
  return static_cast<std::size_t>(count);
}

}  // namespace tether::transport::verbs
