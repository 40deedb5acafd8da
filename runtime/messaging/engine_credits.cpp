// Eager flow control. Every rank lends each peer TETHER_EAGER_CREDITS credits: an eager
// message with a payload spends one, and the receiver gives it back once a receive took
// the message, in the credits_returned field of any header it sends that peer, or in a
// credit message once half of them are owed. A sender without credits sends by
// rendezvous instead: the payload waits in the sender's buffer until the receive is
// posted. So the payloads queued as unexpected at a receiver stay below credits x eager
// limit per peer, and a flood from one peer never starves the others.
#include <algorithm>
#include <cstring>

#include "runtime/base/log.hpp"
#include "runtime/messaging/engine.hpp"

namespace tether::messaging {

bool Engine::may_send_eager(int peer_rank, std::size_t bytes) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  if (bytes > peer.eager_limit) return false;
  if (bytes == 0 || peer.send_credits > 0) return true;
  if (!peer.credits_exhausted) {
    peer.credits_exhausted = true;
    log::info("runtime", "rank {} has used its {} eager credits at rank {} (TETHER_EAGER_CREDITS): messages wait "
              "at the sender by rendezvous until that rank's receives take the earlier ones",
              rank_, options_.eager_credits, peer_rank);
  }
  return false;
}

void Engine::spend_credit(int peer_rank, MessageHeader& header) noexcept {
  if (header.message_bytes == 0) return;
  --peers_[static_cast<std::size_t>(peer_rank)].send_credits;
  header.flags |= kUsesCredit;
}

void Engine::stamp_credits(int peer_rank, MessageHeader& header) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  header.credits_returned = peer.credits_owed;
  peer.credits_lent -= peer.credits_owed;
  peer.credits_owed = 0;
}

// On arrival, before ordering: credits come back whatever the message's sequence.
void Engine::take_back_credits(int source, std::uint32_t returned) noexcept {
  if (returned == 0) return;
  PeerState& peer = peers_[static_cast<std::size_t>(source)];
  std::uint32_t room = options_.eager_credits - peer.send_credits;
  if (returned > room)
    log::error("runtime", "rank {} gave back {} eager credits, {} were lent to it; kept {}", source, returned, room,
               options_.eager_credits);
  peer.send_credits += std::min(returned, room);
  peer.credits_exhausted = false;
}

// Whether a message that spent a credit would be admitted (admit_eager, without its log).
bool Engine::may_admit_eager(const MessageHeader& header) const noexcept {
  if (header.message_bytes == 0) return true;
  const PeerState& peer = peers_[static_cast<std::size_t>(header.source_rank)];
  return (header.flags & kUsesCredit) != 0 && peer.credits_lent < options_.eager_credits;
}

// A payload that spent no credit, or more credits than were lent: the peer ignores flow
// control, and keeping its messages would let it fill this rank's memory.
bool Engine::admit_eager(const MessageHeader& header) noexcept {
  if (header.message_bytes == 0) return true;
  int source = static_cast<int>(header.source_rank);
  PeerState& peer = peers_[static_cast<std::size_t>(source)];
  if (may_admit_eager(header)) {
    ++peer.credits_lent;
    return true;
  }
  log::error("runtime", "dropped a {}-byte eager message from rank {}: {} (it runs another tether version or "
             "is broken)", header.message_bytes, source,
             (header.flags & kUsesCredit) != 0 ? "all its eager credits were in use" : "it spent no eager credit");
  return false;
}

// Whether taking `header`'s message makes the credits owed to its sender reach half of
// those lent, so that owe_credit sends them at once.
bool Engine::owing_sends_credits(const MessageHeader& header) const noexcept {
  const PeerState& peer = peers_[static_cast<std::size_t>(header.source_rank)];
  std::uint32_t half = std::max<std::uint32_t>(1, options_.eager_credits / 2);
  return (header.flags & kUsesCredit) != 0 && peer.credits_owed + 1 >= half;
}

// A receive took a message that spent a credit: owe it back, and send the credits now
// when half are owed (a sender that only sends would otherwise never get them).
void Engine::owe_credit(const MessageHeader& header) noexcept {
  if ((header.flags & kUsesCredit) == 0) return;
  int source = static_cast<int>(header.source_rank);
  bool send_now = owing_sends_credits(header);
  ++peers_[static_cast<std::size_t>(source)].credits_owed;
  if (!send_now || peer_dead(source) || !resolve(source)) return;
  MessageHeader credit = make_header(MessageKind::credit, rank_, 0, 0, 0);
  (void)post_control(source, &credit, sizeof credit);  // stamps the credits; if it fails they ride the next message
}

}  // namespace tether::messaging
