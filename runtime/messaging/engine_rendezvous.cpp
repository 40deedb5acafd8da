// Rendezvous. put: RTS -> CTS (target address and key) -> RMA writes, each chunk with a
// notification naming the receive request -> both complete. get: RTS carries the source
// address and key -> the receiver reads the chunks -> FIN -> both complete. split: the CTS
// asks for the first half, which the sender writes while the receiver reads the rest ->
// FIN once both halves landed -> both complete (on shm-own two cores copy at once).
#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/messaging/engine.hpp"
#include "runtime/messaging/memlock_failure_injection.hpp"

namespace tether::messaging {
namespace {

// Pool memory that one arena holds whole (larger pool buffers are user memory here).
bool within_one_arena(const void* buffer, std::size_t bytes) noexcept {
  PoolLocation location;
  return pool_find(buffer, location) && location.offset + bytes <= location.arena_length;
}

// Where a split rendezvous of `bytes` hands over from the sender's writes to the
// receiver's reads: half way, on a cache line.
std::uint64_t split_point(std::uint64_t bytes) noexcept { return bytes / 2 / 64 * 64; }

std::uint64_t chunk_count(std::uint64_t bytes, std::uint64_t chunk) noexcept {
  return bytes == 0 ? 0 : (bytes + chunk - 1) / chunk;
}

}  // namespace

// auto: split where the receiver maps the send buffer (pool memory, a transport that maps
// the peer's pool: shm-own), so its half is a memcpy; else put (user memory would need
// cross-memory attach, which a put into a pool buffer does not).
RendezvousProtocol Engine::choose_protocol(int peer_rank, const void* buffer, std::size_t bytes) const noexcept {
  if (options_.rendezvous_protocol) return *options_.rendezvous_protocol;
  bool maps = within_one_arena(buffer, bytes) &&
              transport_->maps_peer_pool(peers_[static_cast<std::size_t>(peer_rank)].transport_peer);
  return maps ? RendezvousProtocol::split : RendezvousProtocol::put;
}

// What the peer needs to reach `bytes` of `buffer`: pool memory gets a key of its own
// (TETHER_REMOTE_KEYS=exact) or the arena's; user memory a registration of its pages.
Expected<transport::RemoteBuffer> Engine::expose(RequestSlot* slot, void* buffer, std::size_t bytes) {
  if (bytes == 0) return transport::RemoteBuffer{};
  transport::PeerIndex peer = peers_[static_cast<std::size_t>(slot->peer)].transport_peer;
  if (!within_one_arena(buffer, bytes)) return expose_user_buffer(slot, peer, buffer, bytes);
  Access access = slot->kind == RequestKind::receive ? Access::remote_write : Access::remote_read;
  auto key = transport_->expose_pool_range(peer, buffer, bytes, access, options_.remote_keys);
  if (!key) return tl::unexpected(key.error());
  slot->pool_key = std::move(*key);
  return slot->pool_key.remote();
}

Expected<transport::RemoteBuffer> Engine::expose_user_buffer(RequestSlot* slot, transport::PeerIndex peer,
                                                             void* buffer, std::size_t bytes) {
  if (const Registration* cached = expose_cached(slot, buffer, bytes))
    return transport_->describe_for(peer, *cached, buffer, bytes);
  auto registration = transport::register_pages(user_registrar(), buffer, bytes);
  if (!registration) return tl::unexpected(registration.error());
  slot->registration = *registration;
  slot->registered = true;
  return transport_->describe_for(peer, *registration, buffer, bytes);
}

transport::RemoteBuffer Engine::exposed_to_peer(const Request& request) noexcept {
  RequestSlot* slot = requests_.find(request);
  return slot == nullptr ? transport::RemoteBuffer{} : slot->pool_key.remote();
}

// The cache's registration when one cache entry covers the buffer (a peer needs one
// key); nullptr when the range spans entries or there is no cache.
const Registration* Engine::expose_cached(RequestSlot* slot, void* buffer, std::size_t bytes) noexcept {
  RegistrationCache* cache = user_cache();
  if (cache == nullptr) return nullptr;
  auto handle = cache->acquire(buffer, bytes);
  if (!handle || handle->from_pool() || handle->segment_count() != 1) return nullptr;
  slot->cached = std::move(*handle);
  return &slot->cached.segment(0).registrations[0];
}

Registrar& Engine::user_registrar() noexcept {
  if (!options_.inject_memlock_failure) return transport_->registrar();
  static MemlockFailureInjectingRegistrar failing;
  return failing;
}

RegistrationCache* Engine::user_cache() noexcept {
  if (user_cache_ || user_cache_unavailable_) return user_cache_.get();
  user_cache_unavailable_ = true;
  auto monitor = rcache_start_monitor();
  Registrar* registrars[] = {&user_registrar()};
  auto cache = monitor ? RegistrationCache::create(registrars, RcacheOptions::from_config())
                       : Expected<std::unique_ptr<RegistrationCache>>(tl::unexpected(monitor.error()));
  if (!cache) {
    log::warn("runtime", "user buffers are registered per transfer, without a cache: {}", cache.error().message());
    return nullptr;
  }
  user_cache_ = std::move(*cache);
  user_cache_unavailable_ = false;
  return user_cache_.get();
}

void Engine::deregister_exposed(RequestSlot* slot) noexcept {
  user_registrar().deregister(slot->registration);
  slot->registered = false;
}

void* Engine::descriptor_of(RequestSlot* slot, const void*) noexcept {
  if (!slot->cached.empty()) return slot->cached.segment(0).registrations[0].local_descriptor;
  return slot->registered ? slot->registration.local_descriptor : nullptr;
}

void Engine::answer_rts(RequestSlot* receive, const MessageHeader& header, const RendezvousRequest& rts) noexcept {
  int source = static_cast<int>(header.source_rank);
  count_one(rendezvous_received_);
  receive->info.source = source;
  receive->info.tag = header.tag;
  receive->info.bytes = header.message_bytes;
  receive->transfer_bytes = std::min<std::uint64_t>(header.message_bytes, receive->buffer_bytes);
  receive->info.received_bytes = receive->transfer_bytes;
  receive->chunk_bytes = options_.chunk_bytes;
  receive->chunks_left = chunk_count(receive->transfer_bytes, receive->chunk_bytes);
  receive->peer_request = rts.sender_request;
  receive->protocol = rts.protocol;
  receive->remote = rts.source;
  receive->peer = source;
  // Its sender died since the RTS came (a receive from any source matched it late): the data
  // cannot be fetched, and a dead rank is watched no more.
  if (dead_[static_cast<std::size_t>(source)]->load()) return fail_for_dead_peer(receive, header.tag);
  // A receive from any source now waits on this one sender: watch it (TETHER_PEER_TIMEOUT),
  // as a receive naming its source is watched from the start.
  if (!receive->watched) watch_request(receive);
  auto resolved = resolve(source);
  auto target = resolved ? expose(receive, receive->receive_buffer, receive->transfer_bytes)
                         : tl::unexpected(resolved.error());
  if (!target) {
    log::error("runtime", "rendezvous from rank {} cannot land: {}", source, target.error().message());
    if (resolved) refuse_rendezvous(receive, header, target.error().code);
    return complete(receive, target.error().code);
  }
  if (rts.protocol == RendezvousProtocol::split) return answer_split(receive, header, *target);
  if (rts.protocol == RendezvousProtocol::get) {
    if (receive->chunks_left == 0) return finish_get(receive);
    if (!post_chunks(receive)) waiting_writes_.push_back(receive);
    return;
  }
  struct {
    MessageHeader header;
    ClearToSend body;
  } message{make_header(MessageKind::cts, rank_, header.tag, 0, header.message_bytes),
            ClearToSend{rts.sender_request, requests_.id_of(receive), *target, receive->transfer_bytes,
                        receive->chunk_bytes}};
  receive->writes_due = receive->chunks_left;
  if (!post_control(source, &message, sizeof message)) return complete(receive, Errc::out_of_memory);
  if (receive->chunks_left == 0) finish_receive(receive);
}

// Split: the CTS asks the sender to write the first half, and this side reads the rest at
// once; the receive counts both halves' chunks and ends with a FIN (finish_get), which the
// sender waits for too (it must not reuse a buffer this side still reads).
void Engine::answer_split(RequestSlot* receive, const MessageHeader& header,
                          const transport::RemoteBuffer& target) noexcept {
  std::uint64_t written = split_point(receive->transfer_bytes);
  struct {
    MessageHeader header;
    ClearToSend body;
  } message{make_header(MessageKind::cts, rank_, header.tag, 0, header.message_bytes),
            ClearToSend{receive->peer_request, requests_.id_of(receive), target, written, receive->chunk_bytes}};
  if (!post_control(receive->peer, &message, sizeof message)) return complete(receive, Errc::out_of_memory);
  receive->writes_due = chunk_count(written, receive->chunk_bytes);
  receive->chunks_left = receive->writes_due + chunk_count(receive->transfer_bytes - written, receive->chunk_bytes);
  receive->posted_bytes = written;  // the reads start there
  count_one(split_rendezvous_received_);
  if (receive->chunks_left == 0) return finish_get(receive);
  if (!post_chunks(receive)) waiting_writes_.push_back(receive);
}

// Tells the sender its message cannot land here, so its send fails with `error` instead of
// waiting for a CTS that never comes.
void Engine::refuse_rendezvous(RequestSlot* receive, const MessageHeader& header, Errc error) noexcept {
  struct {
    MessageHeader header;
    ClearToSend body;
  } message{make_header(MessageKind::cts, rank_, header.tag, 0, header.message_bytes),
            ClearToSend{receive->peer_request, requests_.id_of(receive), transport::RemoteBuffer{}, 0,
                        static_cast<std::uint64_t>(error)}};
  message.header.flags = kRefused;
  if (!post_control(receive->peer, &message, sizeof message))
    log::error("runtime", "could not tell rank {} that its message cannot land; its send waits", receive->peer);
}

// The request of `kind` a CTS, FIN or abort names, if it is still in flight with that rank.
RequestSlot* Engine::in_flight(RequestId id, RequestKind kind, int peer_rank) noexcept {
  RequestSlot* slot = requests_.find(id);
  bool pending = slot != nullptr && slot->kind == kind && slot->peer == peer_rank &&
                 slot->state.load(std::memory_order_acquire) == SlotState::pending;
  return pending ? slot : nullptr;
}

void Engine::on_cts(const DecodedMessage& message) noexcept {
  int source = static_cast<int>(message.header.source_rank);
  RequestSlot* send = in_flight(message.cts.sender_request, RequestKind::send, source);
  if (send == nullptr) {
    log::error("runtime", "dropped a CTS from rank {} for a send that is not in flight", source);
    return;
  }
  if ((message.header.flags & kRefused) != 0) {
    auto error = static_cast<Errc>(message.cts.chunk_bytes);
    log::error("runtime", "rank {} refused the {}-byte message with tag {}: {} (its log says why)", source,
               send->buffer_bytes, send->tag, errc_name(error));
    return complete(send, error);
  }
  if (message.cts.bytes_to_write > send->buffer_bytes) {
    log::error("runtime", "CTS from rank {} asks for {} bytes of a {}-byte send (that rank is broken)", source,
               message.cts.bytes_to_write, send->buffer_bytes);
    return refuse_cts(send, message.cts);
  }
  if (message.cts.chunk_bytes > options_.chunk_bytes && message.cts.bytes_to_write > 0) {
    log::error("runtime",
               "CTS from rank {} asks for {}-byte chunks, and this rank writes at most {}-byte chunks: set the same "
               "TETHER_RNDV_CHUNK on every rank",
               source, message.cts.chunk_bytes, options_.chunk_bytes);
    return refuse_cts(send, message.cts);
  }
  send->remote = message.cts.target;
  send->peer_request = message.cts.receiver_request;
  send->transfer_bytes = message.cts.bytes_to_write;
  send->chunk_bytes = message.cts.chunk_bytes;
  // A split send also waits for the receiver's FIN: it reads the rest of this buffer.
  bool awaits_fin = send->protocol == RendezvousProtocol::split;
  send->fin_due = awaits_fin;
  send->chunks_left = chunk_count(send->transfer_bytes, send->chunk_bytes) + (awaits_fin ? 1 : 0);
  if (!awaits_fin) send->protocol = RendezvousProtocol::put;
  if (send->chunks_left == 0) return complete(send, Errc::ok);
  if (send->transfer_bytes == 0) return;  // only the FIN to come
  if (!post_chunks(send)) waiting_writes_.push_back(send);
}

// A CTS this side cannot follow: the receiver answered and waits for writes, so it gets an
// abort with none landed (a split send then waits for its FIN: it reads this buffer).
void Engine::refuse_cts(RequestSlot* send, const ClearToSend& cts) noexcept {
  send->peer_request = cts.receiver_request;
  send->fin_due = send->protocol == RendezvousProtocol::split;
  abort_send(send, Errc::invalid_argument);
}

bool Engine::post_chunks(RequestSlot* slot) noexcept {
  transport::PeerIndex peer = peers_[static_cast<std::size_t>(slot->peer)].transport_peer;
  bool writing = slot->kind == RequestKind::send;
  // A send whose write failed writes no more; a receive still posts its reads, so none is
  // in flight when it ends.
  while (slot->posted_bytes < slot->transfer_bytes && !(writing && slot->transfer_error != Errc::ok)) {
    std::size_t offset = slot->posted_bytes;
    std::size_t length = std::min<std::uint64_t>(slot->chunk_bytes, slot->transfer_bytes - offset);
    Errc error = Errc::ok;
    Status status =
        writing ? post_write(slot, peer, offset, length, error) : post_read(slot, peer, offset, length, error);
    if (status == Status::retry) return false;
    if (status == Status::error) {
      fail_transfer(slot, error);
      return true;
    }
    slot->posted_bytes += length;
    if (writing) ++slot->writes_in_flight;
  }
  return true;
}

// One chunk each; on Status::error, `error` says why (logged here).
Status Engine::post_write(RequestSlot* slot, transport::PeerIndex peer, std::size_t offset, std::size_t length,
                          Errc& error) noexcept {
  if (write_failure_injected()) {
    log::error("runtime", "rendezvous write to rank {} failed (injected by TETHER_INJECT_WRITE_FAILURE)", slot->peer);
    if (options_.inject_write_failure_at_completion) return fail_later(slot);
    error = Errc::transport;
    return Status::error;
  }
  auto* local = static_cast<const std::byte*>(slot->send_buffer) + offset;
  Status status = transport_->write_with_notification(peer, local, length, descriptor_of(slot, local), slot->remote,
                                                      offset, slot->peer_request.packed() & ~kChannelNotificationBit,
                                                      chunk_context(ContextKind::chunk_write, slot));
  if (status == Status::done || status == Status::posted) ++writes_posted_;
  if (status == Status::error) error = post_failure(slot->peer);
  return status;
}

Status Engine::post_read(RequestSlot* slot, transport::PeerIndex peer, std::size_t offset, std::size_t length,
                         Errc& error) noexcept {
  auto* local = static_cast<std::byte*>(slot->receive_buffer) + offset;
  Status status = transport_->read(peer, local, length, descriptor_of(slot, local), slot->remote, offset,
                                   chunk_context(ContextKind::chunk_read, slot));
  if (status == Status::error) error = post_failure(slot->peer);
  return status;
}

Errc Engine::post_failure(int peer_rank) noexcept {
  log::error("runtime", "rendezvous with rank {} failed: {}", peer_rank, transport_->last_error().message());
  Errc code = transport_->last_error().code;
  return code == Errc::ok ? Errc::transport : code;
}

// TETHER_INJECT_WRITE_FAILURE_AT=completion: the write is taken as posted (it never
// reaches the peer) and its completion, at the next progress pass, is an error.
Status Engine::fail_later(RequestSlot* slot) noexcept {
  transport::Completion failed;
  failed.failed_kind = transport::CompletionKind::write_done;
  failed.error = Errc::transport;
  failed.peer = peers_[static_cast<std::size_t>(slot->peer)].transport_peer;
  failed.context = chunk_context(ContextKind::chunk_write, slot);
  failed.cause = "injected by TETHER_INJECT_WRITE_FAILURE_AT=completion";
  complete_at_next_pass(failed);
  return Status::posted;
}

void Engine::complete_at_next_pass(const transport::Completion& failed) noexcept {
  try {
    injected_failures_.push_back(failed);
  } catch (...) {
    log::error("runtime", "an injected failure was lost: no memory");
  }
}

// TETHER_INJECT_WRITE_FAILURE=N: the write this rank would post N-th fails, once (a post
// that met back-pressure and is tried again counts once).
bool Engine::write_failure_injected() noexcept {
  if (options_.inject_write_failure == 0 || write_failure_fired_ || writes_posted_ + 1 != options_.inject_write_failure)
    return false;
  write_failure_fired_ = true;
  return true;
}

void Engine::resume_writes() noexcept {
  while (!waiting_writes_.empty()) {
    RequestSlot* slot = waiting_writes_.front();
    if (slot->state.load(std::memory_order_relaxed) == SlotState::pending && !post_chunks(slot)) return;
    waiting_writes_.pop_front();
  }
}

void Engine::on_chunk_done(const transport::Completion& completion) noexcept {
  RequestSlot* slot = chunk_slot(completion.context);
  if (slot == nullptr || slot->chunks_left == 0) return;
  if (slot->kind == RequestKind::send) {
    --slot->writes_in_flight;
    ++slot->writes_landed;
    if (slot->transfer_error != Errc::ok) return abort_send(slot, slot->transfer_error);
  }
  if (--slot->chunks_left > 0) return;
  if (slot->kind == RequestKind::send) return complete(slot, Errc::ok);
  finish_get(slot);
}

// A chunk the transport reported failed: a write of a send was in flight until now.
void Engine::on_chunk_failed(RequestSlot* slot, Errc error) noexcept {
  if (slot->kind == RequestKind::send && slot->writes_in_flight > 0) --slot->writes_in_flight;
  fail_transfer(slot, error);
}

void Engine::finish_get(RequestSlot* receive) noexcept {
  struct {
    MessageHeader header;
    RendezvousDone body;
  } message{make_header(MessageKind::fin, rank_, receive->info.tag, 0, receive->info.bytes),
            RendezvousDone{receive->peer_request}};
  if (!post_control(receive->peer, &message, sizeof message)) return complete(receive, Errc::out_of_memory);
  finish_receive(receive);
}

// A transfer that failed. A get or split receive answered already, so its sender waits
// for a FIN: it gets one flagged kRefused with the error, and its send fails too. A send
// (put or split) aborts: its receiver waits for its writes.
void Engine::fail_transfer(RequestSlot* slot, Errc error) noexcept {
  if (slot->kind == RequestKind::send) return abort_send(slot, error);
  if (slot->protocol != RendezvousProtocol::put) {
    struct {
      MessageHeader header;
      RendezvousDone body;
    } message{make_header(MessageKind::fin, rank_, slot->info.tag, 0, static_cast<std::uint64_t>(error)),
              RendezvousDone{slot->peer_request}};
    message.header.flags = kRefused;
    if (!post_control(slot->peer, &message, sizeof message))
      log::error("runtime", "could not tell rank {} that its message failed here; its send waits", slot->peer);
  }
  complete(slot, error);
}

// A send whose write failed writes no more; once its writes in flight are done, the
// receiver learns how many landed (it stops waiting for the others) and the send fails. A
// split send still waits for the receiver's FIN: until then the receiver may read its buffer.
void Engine::abort_send(RequestSlot* send, Errc error) noexcept {
  if (send->transfer_error == Errc::ok) send->transfer_error = error;
  if (send->writes_in_flight > 0) return;  // the last one to complete comes back here
  struct {
    MessageHeader header;
    RendezvousAbort body;
  } message{make_header(MessageKind::abort, rank_, send->tag, 0, static_cast<std::uint64_t>(send->transfer_error)),
            RendezvousAbort{send->peer_request, send->writes_landed}};
  bool told = post_control(send->peer, &message, sizeof message);
  if (!told)
    log::error("runtime", "could not tell rank {} that the writes of its message failed; its receive waits",
               send->peer);
  if (!told || !send->fin_due) return complete(send, send->transfer_error);
  send->chunks_left = 1;  // the FIN: the receiver may still read this buffer
}

// The sender's writes failed: of the notifications still due, only those of writes that
// completed at the sender come. The receive fails once they and its own reads are in.
void Engine::on_abort(const DecodedMessage& message) noexcept {
  int source = static_cast<int>(message.header.source_rank);
  RequestSlot* receive = in_flight(message.abort.receiver_request, RequestKind::receive, source);
  if (receive == nullptr || receive->protocol == RendezvousProtocol::get || receive->chunks_left == 0 ||
      receive->transfer_error != Errc::ok) {
    log::error("runtime", "dropped an abort from rank {} for no receive waiting on its writes", source);
    return;
  }
  auto error = static_cast<Errc>(message.header.message_bytes);
  log::error("runtime", "rank {} could not write the {}-byte message with tag {}: {} (its log says why)", source,
             receive->info.bytes, receive->info.tag, errc_name(error));
  std::uint64_t coming = writes_still_coming(*receive, message.abort.writes_landed);
  receive->chunks_left -= receive->writes_due - coming;
  receive->writes_due = coming;
  receive->transfer_error = error;
  if (receive->chunks_left == 0) finish_rendezvous_receive(receive);
}

// Of the writes the sender says completed, the notifications that have not arrived yet
// (never more than were still due).
std::uint64_t Engine::writes_still_coming(const RequestSlot& receive, std::uint64_t writes_landed) noexcept {
  if (writes_landed <= receive.writes_landed) return 0;
  return std::min(writes_landed - receive.writes_landed, receive.writes_due);
}

// put: every write landed; split and get: this side's reads too, and the sender hears FIN.
void Engine::finish_rendezvous_receive(RequestSlot* receive) noexcept {
  if (receive->protocol == RendezvousProtocol::put) return finish_receive(receive);
  finish_get(receive);
}

void Engine::finish_receive(RequestSlot* receive) noexcept {
  if (receive->transfer_error != Errc::ok) {
    receive->info.received_bytes = 0;  // what landed is undefined
    return complete(receive, receive->transfer_error);
  }
  complete(receive, receive->info.received_bytes < receive->info.bytes ? Errc::truncated : Errc::ok);
}

void Engine::on_remote_write(const transport::Completion& completion) noexcept {
  RequestId id = RequestId::unpack(completion.notification);  // the writer cleared bit 63
  RequestSlot* receive = id.index < requests_.capacity() ? requests_.at(id.index) : nullptr;
  if (receive != nullptr && ((receive->generation.load(std::memory_order_acquire) & 0x7fffffffU) != id.generation ||
                             receive->state.load(std::memory_order_acquire) != SlotState::pending))
    receive = nullptr;
  if (receive == nullptr || receive->kind != RequestKind::receive || receive->chunks_left == 0) {
    log::error("runtime", "dropped a write notification {:#x} for no receive in flight", completion.notification);
    return;
  }
  if (receive->writes_due == 0) {  // a get, or past what an abort said would come
    log::error("runtime", "dropped a write notification {:#x} for a receive expecting none", completion.notification);
    return;
  }
  --receive->writes_due;
  ++receive->writes_landed;
  if (--receive->chunks_left > 0) return;
  finish_rendezvous_receive(receive);
}

void Engine::on_fin(const DecodedMessage& message) noexcept {
  int source = static_cast<int>(message.header.source_rank);
  RequestSlot* send = in_flight(message.fin.sender_request, RequestKind::send, source);
  bool split = send != nullptr && send->protocol == RendezvousProtocol::split;
  bool refused = (message.header.flags & kRefused) != 0;  // may come before the CTS was read
  if (send == nullptr || (split && !send->fin_due && !refused)) {
    log::error("runtime", "dropped a FIN from rank {} for a send that is not in flight or expects none", source);
    return;
  }
  if (refused) {
    auto error = static_cast<Errc>(message.header.message_bytes);
    log::error("runtime", "rank {} failed the {}-byte message with tag {}: {} (its log says why)", source,
               send->buffer_bytes, send->tag, errc_name(error));
    return complete(send, error);
  }
  send->fin_due = false;
  if (split && send->chunks_left > 1) {  // its own writes still land
    --send->chunks_left;
    return;
  }
  complete(send, send->transfer_error);  // an aborted split send waited for this FIN
}

}  // namespace tether::messaging
