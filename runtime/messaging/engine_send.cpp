// Sending: eager copies through a pinned bounce buffer, rendezvous starts with an RTS,
// messages to ourselves wait for their receive. Back-pressure queues, in order.
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/messaging/engine.hpp"

namespace tether::messaging {

void Engine::send_to_peer(RequestSlot* slot) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(slot->peer)];
  auto resolved = resolve(slot->peer);
  if (!resolved) {
    log::error("runtime", "cannot reach rank {}: {}", slot->peer, resolved.error().message());
    return complete(slot, Errc::peer_unreachable);
  }
  if (slot->buffer_bytes <= options_.eager_limit_bytes) return send_eager(slot, peer);
  send_rts(slot, peer);
}

void Engine::send_eager(RequestSlot* slot, PeerState& peer) noexcept {
  MessageHeader header = make_header(MessageKind::eager, rank_, slot->tag, peer.next_send_sequence++,
                                     slot->buffer_bytes);
  std::size_t length = sizeof header + slot->buffer_bytes;
  auto* bounce = static_cast<std::byte*>(pinned_alloc(length, 64));
  if (bounce == nullptr) return complete(slot, Errc::out_of_memory);
  std::memcpy(bounce, &header, sizeof header);
  if (slot->buffer_bytes > 0) std::memcpy(bounce + sizeof header, slot->send_buffer, slot->buffer_bytes);
  post_bounce(slot->peer, bounce, length);
  complete(slot, Errc::ok);  // the user's buffer may be reused now
}

void Engine::send_rts(RequestSlot* slot, PeerState& peer) noexcept {
  auto source = expose(slot, const_cast<void*>(slot->send_buffer), slot->buffer_bytes);
  if (!source) {
    log::error("runtime", "cannot register a {}-byte send buffer: {}", slot->buffer_bytes, source.error().message());
    return complete(slot, source.error().code);
  }
  struct {
    MessageHeader header;
    RendezvousRequest body;
  } message{make_header(MessageKind::rts, rank_, slot->tag, peer.next_send_sequence++, slot->buffer_bytes),
            RendezvousRequest{requests_.id_of(slot), *source, choose_protocol(), {}}};
  post_control(slot->peer, &message, sizeof message);
}

void Engine::send_to_self(RequestSlot* slot) noexcept {
  if (RequestSlot* receive = match_posted(rank_, slot->tag)) return land_self(receive, slot);
  UnexpectedMessage message;
  message.header = make_header(MessageKind::eager, rank_, slot->tag, 0, slot->buffer_bytes);
  message.self_send = slot;
  unexpected_.push_back(std::move(message));
}

void Engine::post_control(int peer_rank, const void* bytes, std::size_t length) noexcept {
  auto* bounce = static_cast<std::byte*>(pinned_alloc(length, 64));
  if (bounce == nullptr) {
    log::error("runtime", "no pinned memory for a {}-byte control message to rank {}: {}", length, peer_rank,
               pinned_last_error().message());
    return;
  }
  std::memcpy(bounce, bytes, length);
  post_bounce(peer_rank, bounce, length);
}

// Sends a pinned bounce buffer (freed when the send completes), or queues it behind
// earlier messages that met back-pressure, so a pair's order holds.
void Engine::post_bounce(int peer_rank, std::byte* bounce, std::size_t length) noexcept {
  if (!backlog_.empty()) {
    backlog_.push_back(Outgoing{peer_rank, bounce, length});
    return;
  }
  Status status = transport_->send(peers_[static_cast<std::size_t>(peer_rank)].transport_peer, bounce, length,
                                   nullptr, make_context(ContextKind::send_bounce, reinterpret_cast<std::uint64_t>(bounce)));
  if (status == Status::retry) return backlog_.push_back(Outgoing{peer_rank, bounce, length});
  if (status == Status::done) return pinned_free(bounce);
  if (status == Status::error) {
    log::error("runtime", "send to rank {} failed: {}", peer_rank, transport_->last_error().message());
    pinned_free(bounce);
  }
}

void Engine::flush_backlog() noexcept {
  while (!backlog_.empty()) {
    Outgoing next = backlog_.front();
    Status status = transport_->send(peers_[static_cast<std::size_t>(next.peer)].transport_peer, next.bounce,
                                     next.length, nullptr,
                                     make_context(ContextKind::send_bounce, reinterpret_cast<std::uint64_t>(next.bounce)));
    if (status == Status::retry) return;
    backlog_.pop_front();
    if (status == Status::done) pinned_free(next.bounce);
    if (status == Status::error) {
      log::error("runtime", "send to rank {} failed: {}", next.peer, transport_->last_error().message());
      pinned_free(next.bounce);
    }
  }
  resume_writes();
}

}  // namespace tether::messaging
