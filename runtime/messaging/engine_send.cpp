// Sending: eager copies through a pinned bounce buffer, rendezvous starts with an RTS,
// messages to ourselves wait for their receive. Back-pressure queues, in order.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/messaging/engine_credits.hpp"

namespace tether::messaging {

void Engine::send_to_peer(RequestSlot* slot) noexcept {
  // Dead since the send started (its command queued meanwhile): the dead-peer pass left it here.
  if (dead_[static_cast<std::size_t>(slot->peer)]->load()) return complete(slot, Errc::peer_unreachable);
  PeerState& peer = peers_[static_cast<std::size_t>(slot->peer)];
  auto resolved = resolve(slot->peer);
  if (!resolved) {
    log::error("runtime", "cannot reach rank {}: {}", slot->peer, resolved.error().message());
    return complete(slot, Errc::peer_unreachable);
  }
  if (may_send_eager(slot->peer, slot->buffer_bytes)) return send_eager(slot, peer);
  send_rts(slot, peer);
}

// A sequence number is taken only once the message will go: a number that never
// arrives would hold back every later message of the pair. A message the transport takes
// at once (inject size) is built on the stack; larger ones go through a pinned bounce buffer.
void Engine::send_eager(RequestSlot* slot, PeerState& peer) noexcept {
  std::size_t length = sizeof(MessageHeader) + slot->buffer_bytes;
  alignas(64) std::byte inline_bytes[kInlineEagerBytes];
  bool send_inline = length <= inline_eager_bytes_ && backlog_.empty();
  auto* message = send_inline ? inline_bytes : static_cast<std::byte*>(pinned_alloc(length, 64));
  if (message == nullptr) return complete(slot, Errc::out_of_memory);
  MessageHeader header = write_eager(slot->peer, slot->tag, peer.next_send_sequence++, slot->send_buffer,
                                     slot->buffer_bytes, message);
  if (!send_inline) return post_bounce(slot->peer, message, length, slot);  // completes the request once posted
  Errc outcome = inject(slot->peer, message, length, slot);
  if (outcome != Errc::ok) withdraw(slot->peer, header, slot, outcome);
}

bool Engine::send_at_start(const void* buffer, std::size_t bytes, int peer_rank, int tag, Request& request) noexcept {
  if (peer_rank == rank_ || !backlog_.empty()) return false;
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  std::size_t length = sizeof(MessageHeader) + bytes;
  if (peer.transport_peer == transport::kUnknownPeer || length > inline_eager_bytes_ || !may_send_eager(peer_rank, bytes))
    return false;
  alignas(64) std::byte message[kInlineEagerBytes];
  MessageHeader header = write_eager(peer_rank, tag, peer.next_send_sequence, buffer, bytes, message);
  Status status = transport_->send(peer.transport_peer, message, length, nullptr, make_context(ContextKind::send_bounce, 0));
  if (status == Status::retry || status == Status::error) {  // the general way meets it again, with a request
    give_back_credits(peer_rank, header);
    return false;
  }
  ++peer.next_send_sequence;
  count_one(messages_sent_);
  request = Request{kSentAtStart, static_cast<std::uint32_t>(bytes)};
  return true;
}

Status Engine::finish_sent_at_start(Request& request, MessageInfo* info) noexcept {
  if (info != nullptr) *info = MessageInfo{.bytes = request.generation};
  request = Request{};
  return Status::done;
}

// Hands a message on the stack to the transport, which copies it at once; on back-pressure
// it moves to a bounce buffer and waits behind nothing (the backlog was empty). An error
// means the message never left (the transport refused it, or no pinned memory was left
// for the copy).
Errc Engine::inject(int peer_rank, const std::byte* message, std::size_t length, RequestSlot* eager_request) noexcept {
  Status status = transport_->send(peers_[static_cast<std::size_t>(peer_rank)].transport_peer, message, length,
                                   nullptr, make_context(ContextKind::send_bounce, 0));
  if (status == Status::retry) {
    std::byte* bounce = copy_to_bounce(peer_rank, message, length);
    if (bounce == nullptr) return Errc::out_of_memory;
    post_bounce(peer_rank, bounce, length, eager_request);
    return Errc::ok;
  }
  if (status == Status::error) {
    log::error("runtime", "send to rank {} failed: {}", peer_rank, transport_->last_error().message());
    Errc code = transport_->last_error().code;
    return code == Errc::ok ? Errc::transport : code;
  }
  count_one(messages_sent_);
  complete(eager_request, Errc::ok);
  return Errc::ok;
}

// Undoes what send_eager took for a message that never left: its sequence number (a gap
// would hold back every later message of the pair) and the credits it spent and carried.
void Engine::withdraw(int peer_rank, const MessageHeader& header, RequestSlot* eager_request, Errc why) noexcept {
  --peers_[static_cast<std::size_t>(peer_rank)].next_send_sequence;
  give_back_credits(peer_rank, header);
  complete(eager_request, why);
}

// The credit a message that never left spent, and those it carried, are the peer's again.
void Engine::give_back_credits(int peer_rank, const MessageHeader& header) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  if ((header.flags & kUsesCredit) != 0) ++peer.send_credits;
  peer.credits_owed += header.credits_returned;
  peer.credits_lent += header.credits_returned;
}

// An eager message (header, then payload) into `out`: spends a credit, carries those owed.
MessageHeader Engine::write_eager(int peer_rank, int tag, std::uint32_t sequence, const void* buffer, std::size_t bytes,
                                  std::byte* out) noexcept {
  MessageHeader header = make_header(MessageKind::eager, rank_, tag, sequence, bytes);
  spend_credit(peer_rank, header);
  stamp_credits(peer_rank, header);
  std::memcpy(out, &header, sizeof header);
  if (bytes > 0) std::memcpy(out + sizeof header, buffer, bytes);
  return header;
}

void Engine::send_rts(RequestSlot* slot, PeerState& peer) noexcept {
  slot->protocol = choose_protocol(slot->peer, slot->send_buffer, slot->buffer_bytes);
  auto source = expose(slot, const_cast<void*>(slot->send_buffer), slot->buffer_bytes);
  if (!source) {
    log::error("runtime", "cannot register a {}-byte send buffer: {}", slot->buffer_bytes, source.error().message());
    return complete(slot, source.error().code);
  }
  struct {
    MessageHeader header;
    RendezvousRequest body;
  } message{make_header(MessageKind::rts, rank_, slot->tag, peer.next_send_sequence, slot->buffer_bytes),
            RendezvousRequest{requests_.id_of(slot), *source, slot->protocol, {}}};
  if (!post_control(slot->peer, &message, sizeof message, BounceSource::pool))  // fails here alone
    return complete(slot, Errc::out_of_memory);
  ++peer.next_send_sequence;
}

void Engine::send_to_self(RequestSlot* slot) noexcept {
  if (RequestSlot* receive = match_posted(rank_, slot->tag)) return land_self(receive, slot);
  UnexpectedMessage message;
  message.header = make_header(MessageKind::eager, rank_, slot->tag, 0, slot->buffer_bytes);
  message.self_send = slot;
  unexpected_.push_back(std::move(message));
}

static_assert(sizeof(MessageHeader) + std::max({sizeof(RendezvousRequest), sizeof(ClearToSend), sizeof(RendezvousDone),
                                                 sizeof(RendezvousAbort), sizeof(ChannelCarry)}) <=
                  ControlReserve::kSlotBytes,
              "every control message must fit a control reserve buffer");

bool Engine::post_control(int peer_rank, const void* bytes, std::size_t length, BounceSource source) noexcept {
  std::byte* bounce = copy_to_bounce(peer_rank, bytes, length, source);
  if (bounce == nullptr) return false;
  MessageHeader header;
  std::memcpy(&header, bounce, sizeof header);
  stamp_credits(peer_rank, header);
  std::memcpy(bounce, &header, sizeof header);
  post_bounce(peer_rank, bounce, length, nullptr);
  return true;
}

bool Engine::send_channel_word(int peer_rank, std::uint64_t word) noexcept {
  std::byte message[kChannelHeaderBytes];
  write_channel_header(message, rank_, 0, 0, ChannelCarry{0, word});
  return post_control(peer_rank, message, sizeof message);
}

std::byte* Engine::copy_to_bounce(int peer_rank, const void* bytes, std::size_t length,
                                  BounceSource source) noexcept {
  bool reserve = source == BounceSource::pool_or_reserve;
  auto* bounce = static_cast<std::byte*>(pinned_alloc(length, 64));
  if (bounce == nullptr && reserve) bounce = control_reserve_.take(length);
  if (bounce == nullptr) {
    log::error("runtime", "no pinned memory for a {}-byte message to rank {}{}: {}", length, peer_rank,
               reserve ? fmt::format(" (and {} of the {} control reserve's buffers left)", control_reserve_.left(),
                                     ControlReserve::kSlots)
                       : "",
               pinned_last_error().message());
    return nullptr;
  }
  std::memcpy(bounce, bytes, length);
  return bounce;
}

void Engine::free_bounce(void* bounce) noexcept {
  if (control_reserve_.owns(bounce)) return control_reserve_.give_back(bounce);
  pinned_free(bounce);
}

void Engine::post_raw(int peer_rank, std::span<const std::byte> bytes, bool take_sequence) noexcept {
  auto resolved = resolve(peer_rank);
  if (!resolved) return log::error("runtime", "raw message to rank {}: {}", peer_rank, resolved.error().message());
  std::vector<std::byte> copy(bytes.begin(), bytes.end());
  if (take_sequence && copy.size() >= sizeof(MessageHeader)) {
    std::uint32_t sequence = peers_[static_cast<std::size_t>(peer_rank)].next_send_sequence++;
    std::memcpy(copy.data() + offsetof(MessageHeader, sequence), &sequence, sizeof sequence);
  }
  std::byte* bounce = copy_to_bounce(peer_rank, copy.data(), copy.size());
  if (bounce != nullptr) post_bounce(peer_rank, bounce, copy.size(), nullptr);
}

// Sends a pinned bounce buffer (freed when the send completes), or queues it behind
// earlier messages that met back-pressure, so a pair's order holds.
// `eager_request`, if any, completes once the transport holds the message.
void Engine::post_bounce(int peer_rank, std::byte* bounce, std::size_t length, RequestSlot* eager_request) noexcept {
  count_one(messages_sent_);
  Outgoing outgoing{peer_rank, bounce, length, eager_request};
  if (!backlog_.empty() || try_send(outgoing) == Status::retry) backlog_.push_back(outgoing);
}

Status Engine::try_send(const Outgoing& outgoing) noexcept {
  Status status = transport_->send(peers_[static_cast<std::size_t>(outgoing.peer)].transport_peer, outgoing.bounce,
                                   outgoing.length, nullptr,
                                   make_context(ContextKind::send_bounce, reinterpret_cast<std::uint64_t>(outgoing.bounce)));
  if (status == Status::retry) return status;
  if (status == Status::posted) ++bounces_in_flight_;
  if (status == Status::done) free_bounce(outgoing.bounce);
  if (status == Status::error) {
    log::error("runtime", "send to rank {} failed: {}", outgoing.peer, transport_->last_error().message());
    free_bounce(outgoing.bounce);
  }
  if (outgoing.eager_request != nullptr)
    complete(outgoing.eager_request, status == Status::error ? transport_->last_error().code : Errc::ok);
  return status;
}

// A dead or unreachable peer's queued messages would hold every later message to
// other peers behind them for ever: they go, and their eager requests fail.
void Engine::drop_backlog_of_dead_peers() noexcept {
  for (auto it = backlog_.begin(); it != backlog_.end();) {
    if (dead_seen_[static_cast<std::size_t>(it->peer)] == 0) {
      ++it;
      continue;
    }
    free_bounce(it->bounce);
    if (it->eager_request != nullptr) complete(it->eager_request, Errc::peer_unreachable);
    it = backlog_.erase(it);
  }
}

void Engine::flush_backlog() noexcept {
  while (!backlog_.empty() && try_send(backlog_.front()) != Status::retry) backlog_.pop_front();
  resume_writes();
}

}  // namespace tether::messaging
