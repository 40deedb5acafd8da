// Receiving: decode and validate, restore each pair's order, match against posted
// receives (in post order) or keep as unexpected (in arrival order).
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/messaging/engine_credits.hpp"

namespace tether::messaging {
namespace {

bool matches(const RequestSlot* receive, int source, int tag) noexcept {
  return (receive->peer == kAnySource || receive->peer == source) && (receive->tag == kAnyTag ? tag >= 0 : receive->tag == tag);
}

bool sequenced(MessageKind kind) noexcept { return kind == MessageKind::eager || kind == MessageKind::rts; }

// How far ahead of the next expected message an arrival may be held. Transports reorder
// only what is in flight at once; a sequence further ahead is a broken or hostile peer
// that would otherwise make this rank hold its messages for ever.
constexpr std::uint32_t kMaxSequenceAhead = 1U << 16;

}  // namespace

// A message that arrived before its sender died is still taken; a rendezvous from it fails
// (answer_rts), as does a receive naming a dead rank, or from any rank once every other is
// dead, that nothing matches.
void Engine::post_receive(RequestSlot* slot) noexcept {
  if (!unexpected_.empty() && match_unexpected(slot)) return;
  bool nobody_left = slot->peer >= 0 ? dead_[static_cast<std::size_t>(slot->peer)]->load() : every_other_rank_dead();
  if (nobody_left) return complete(slot, Errc::peer_unreachable);
  posted_.push_back(slot);
}

bool Engine::match_unexpected(RequestSlot* slot) noexcept {
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (!matches(slot, static_cast<int>(it->header.source_rank), it->header.tag)) continue;
    UnexpectedMessage message = std::move(*it);
    unexpected_.erase(it);
    if (message.self_send != nullptr) land_self(slot, message.self_send);
    else if (message.header.kind == MessageKind::rts) answer_rts(slot, message.header, message.rts);
    else land_eager(slot, message.header, message.payload);
    return true;
  }
  return false;
}

RequestSlot* Engine::match_posted(int source, int tag) noexcept {
  RequestSlot* slot = posted_.find_first([&](const RequestSlot* receive) { return matches(receive, source, tag); });
  if (slot != nullptr) posted_.erase(slot);
  return slot;
}

void Engine::on_receive(const transport::Completion& completion) noexcept {
  std::span<const std::byte> bytes(static_cast<const std::byte*>(completion.buffer), completion.length);
  auto message = decode(bytes, size_);
  if (!message) {
    log::error("runtime", "dropped a {}-byte message: {}", completion.length, message.error().message());
    return;
  }
  int source = static_cast<int>(message->header.source_rank);
  PeerState& peer = peers_[static_cast<std::size_t>(source)];
  note_arrival(message->header);
  if (!sequenced(message->header.kind)) return dispatch(*message);
  std::uint32_t sequence = message->header.sequence;
  if (sequence == peer.next_receive_sequence) {
    ++peer.next_receive_sequence;
    dispatch(*message);
    return release_held(source);
  }
  if (static_cast<std::int32_t>(sequence - peer.next_receive_sequence) < 0 || peer.held.count(sequence) != 0) {
    log::error("runtime", "dropped a duplicate message {} from rank {} (expected {})", sequence, source,
               peer.next_receive_sequence);
    return;
  }
  if (sequence - peer.next_receive_sequence > kMaxSequenceAhead) {
    log::error("runtime", "dropped message {} from rank {}: more than {} ahead of the expected {}", sequence, source,
               kMaxSequenceAhead, peer.next_receive_sequence);
    return;
  }
  peer.held.emplace(sequence, HeldMessage{std::vector<std::byte>(bytes.begin(), bytes.end())});
}

// Whatever its kind and sequence, an arrival counts as hearing from its sender and brings
// back the eager credits it carries.
void Engine::note_arrival(const MessageHeader& header) noexcept {
  int source = static_cast<int>(header.source_rank);
  ++peers_[static_cast<std::size_t>(source)].heard_count;
  take_back_credits(source, header.credits_returned);
}

// A message shm-own still holds in its ring: an eager one, next in its pair's order, that
// a posted receive matches is copied straight into that receive's buffer (one copy; no
// receive buffer, completion or repost). Anything else is declined and comes back as a
// completion. Nothing here may call the transport: a credit message due is declined.
bool Engine::take_in_place(std::span<const std::byte> bytes) noexcept {
  EagerView message;
  if (!read_eager(bytes, size_, message)) return false;
  const MessageHeader& header = message.header;
  int source = static_cast<int>(header.source_rank);
  PeerState& peer = peers_[static_cast<std::size_t>(source)];
  if (header.sequence != peer.next_receive_sequence || !peer.held.empty() || !may_admit_eager(header) ||
      owing_sends_credits(header))
    return false;
  RequestSlot* slot = match_posted(source, header.tag);
  if (slot == nullptr) return false;
  note_arrival(header);
  ++peer.next_receive_sequence;
  (void)admit_eager(header);
  land_eager(slot, header, message.payload);
  count_one(messages_read_in_place_);
  return true;
}

// Delivers messages that waited for an earlier one from the same rank.
void Engine::release_held(int source) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(source)];
  for (auto next = peer.held.find(peer.next_receive_sequence); next != peer.held.end();
       next = peer.held.find(peer.next_receive_sequence)) {
    HeldMessage held = std::move(next->second);
    peer.held.erase(next);
    ++peer.next_receive_sequence;
    auto message = decode(held.bytes, size_);
    if (message) dispatch(*message);
  }
}

void Engine::dispatch(const DecodedMessage& message) noexcept {
  switch (message.header.kind) {
    case MessageKind::cts: return on_cts(message);
    case MessageKind::fin: return on_fin(message);
    case MessageKind::abort: return on_abort(message);
    case MessageKind::probe:
    case MessageKind::probe_ack: return on_probe(message);
    case MessageKind::credit: return;  // on_receive took the credits
    case MessageKind::channel:
      if (channel_events_) return channel_events_->on_message(message);
      log::error("runtime", "dropped a channel message from rank {}: no persistent channel exists here",
                 message.header.source_rank);
      return;
    case MessageKind::eager:
      if (!admit_eager(message.header)) return;
      [[fallthrough]];
    case MessageKind::rts: return deliver(message);
  }
}

void Engine::deliver(const DecodedMessage& message) noexcept {
  int source = static_cast<int>(message.header.source_rank);
  if (RequestSlot* slot = match_posted(source, message.header.tag)) {
    if (message.header.kind == MessageKind::rts) return answer_rts(slot, message.header, message.rts);
    return land_eager(slot, message.header, message.payload);
  }
  UnexpectedMessage kept;
  kept.header = message.header;
  kept.payload.assign(message.payload.begin(), message.payload.end());
  kept.rts = message.rts;
  unexpected_.push_back(std::move(kept));
}

void Engine::land_eager(RequestSlot* slot, const MessageHeader& header, std::span<const std::byte> payload) noexcept {
  owe_credit(header);
  std::size_t landed = std::min(payload.size(), slot->buffer_bytes);
  if (landed > 0) std::memcpy(slot->receive_buffer, payload.data(), landed);
  slot->info.source = static_cast<int>(header.source_rank);
  slot->info.tag = header.tag;
  slot->info.bytes = payload.size();
  slot->info.received_bytes = landed;
  complete(slot, landed < payload.size() ? Errc::truncated : Errc::ok);
}

void Engine::land_self(RequestSlot* receive, RequestSlot* send) noexcept {
  std::size_t landed = std::min(send->buffer_bytes, receive->buffer_bytes);
  if (landed > 0) std::memmove(receive->receive_buffer, send->send_buffer, landed);
  receive->info.source = rank_;
  receive->info.tag = send->tag;
  receive->info.bytes = send->buffer_bytes;
  receive->info.received_bytes = landed;
  complete(receive, landed < send->buffer_bytes ? Errc::truncated : Errc::ok);
  complete(send, Errc::ok);
}

}  // namespace tether::messaging
