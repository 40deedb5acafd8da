// Eager flow control. Every rank lends each peer TETHER_EAGER_CREDITS credits: an eager
// message with a payload spends one, and the receiver gives it back once a receive took
// the message, in the credits_returned field of any header it sends that peer, or in a
// credit message once half of them are owed. A sender without credits sends by
// rendezvous instead: the payload waits in the sender's buffer until the receive is
// posted. So the payloads queued as unexpected at a receiver stay below credits x eager
// limit per peer, and a flood from one peer never starves the others.
// The checks on every message are inline in engine_credits.hpp; here are their slow paths.
#include "runtime/base/log.hpp"
#include "runtime/messaging/engine_credits.hpp"

namespace tether::messaging {

void Engine::note_credits_exhausted(int peer_rank) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  if (peer.credits_exhausted) return;
  peer.credits_exhausted = true;
  log::info("runtime", "rank {} has used its {} eager credits at rank {} (TETHER_EAGER_CREDITS): messages wait "
            "at the sender by rendezvous until that rank's receives take the earlier ones",
            rank_, peer.credits_granted, peer_rank);
}

void Engine::report_excess_credits(int source, std::uint32_t returned, std::uint32_t spent) const noexcept {
  log::error("runtime", "rank {} gave back {} eager credits where {} were spent at it; kept {}", source, returned,
             spent, peers_[static_cast<std::size_t>(source)].credits_granted);
}

void Engine::report_refused_eager(const MessageHeader& header) const noexcept {
  log::error("runtime", "dropped a {}-byte eager message from rank {}: {} (it runs another tether version or "
             "is broken)", header.message_bytes, header.source_rank,
             (header.flags & kUsesCredit) != 0 ? "all its eager credits were in use" : "it spent no eager credit");
}

// Half the credits lent to `source` are owed: they go back now in a credit message (a
// sender that only sends would otherwise never get them).
void Engine::send_owed_credits(int source) noexcept {
  if (peer_dead(source) || !resolve(source)) return;
  MessageHeader credit = make_header(MessageKind::credit, rank_, 0, 0, 0);
  (void)post_control(source, &credit, sizeof credit);  // stamps the credits; if it fails they ride the next message
}

}  // namespace tether::messaging
