// Eager flow control's checks on every message, inline (engine_credits.cpp has the policy
// and the slow paths: logs and credit messages). Include it where they are called.
#pragma once

#include <algorithm>

#include "runtime/messaging/engine.hpp"

namespace tether::messaging {

inline bool Engine::may_send_eager(int peer_rank, std::size_t bytes) noexcept {
  const PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  if (bytes > peer.eager_limit) return false;
  if (bytes == 0 || peer.send_credits > 0) return true;
  note_credits_exhausted(peer_rank);
  return false;
}

inline void Engine::spend_credit(int peer_rank, MessageHeader& header) noexcept {
  if (header.message_bytes == 0) return;
  --peers_[static_cast<std::size_t>(peer_rank)].send_credits;
  header.flags |= kUsesCredit;
}

inline void Engine::stamp_credits(int peer_rank, MessageHeader& header) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  header.credits_returned = peer.credits_owed;
  peer.credits_lent -= peer.credits_owed;
  peer.credits_owed = 0;
}

// On arrival, before ordering: credits come back whatever the message's sequence.
inline void Engine::take_back_credits(int source, std::uint32_t returned) noexcept {
  if (returned == 0) return;
  PeerState& peer = peers_[static_cast<std::size_t>(source)];
  std::uint32_t spent = peer.credits_granted - peer.send_credits;
  if (returned > spent) report_excess_credits(source, returned, spent);
  peer.send_credits += std::min(returned, spent);
  peer.credits_exhausted = false;
}

// Whether a message that spent a credit would be admitted (admit_eager, without its log).
inline bool Engine::may_admit_eager(const MessageHeader& header) const noexcept {
  if (header.message_bytes == 0) return true;
  const PeerState& peer = peers_[static_cast<std::size_t>(header.source_rank)];
  return (header.flags & kUsesCredit) != 0 && peer.credits_lent < options_.eager_credits;
}

// A payload that spent no credit, or more credits than were lent: the peer ignores flow
// control, and keeping its messages would let it fill this rank's memory.
inline bool Engine::admit_eager(const MessageHeader& header) noexcept {
  if (header.message_bytes == 0) return true;
  if (!may_admit_eager(header)) {
    report_refused_eager(header);
    return false;
  }
  ++peers_[static_cast<std::size_t>(header.source_rank)].credits_lent;
  return true;
}

// Whether taking `header`'s message makes the credits owed to its sender reach half of
// those lent, so that owe_credit sends them at once.
inline bool Engine::owing_sends_credits(const MessageHeader& header) const noexcept {
  const PeerState& peer = peers_[static_cast<std::size_t>(header.source_rank)];
  std::uint32_t half = std::max<std::uint32_t>(1, options_.eager_credits / 2);
  return (header.flags & kUsesCredit) != 0 && peer.credits_owed + 1 >= half;
}

// A receive took a message that spent a credit: owe it back, at once when half are owed.
inline void Engine::owe_credit(const MessageHeader& header) noexcept {
  if ((header.flags & kUsesCredit) == 0) return;
  bool send_now = owing_sends_credits(header);
  ++peers_[static_cast<std::size_t>(header.source_rank)].credits_owed;
  if (send_now) send_owed_credits(static_cast<int>(header.source_rank));
}

}  // namespace tether::messaging
