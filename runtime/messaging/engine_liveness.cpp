// Peer liveness. A peer that a pending send or receive (or a persistent channel) waits on
// is watched: when nothing
// came from it for a quarter of TETHER_PEER_TIMEOUT it gets a probe, which its engine
// answers on its next progress pass; when still nothing came after the whole timeout it
// is unreachable, and requests with it fail naming it. Transport errors that say a peer
// cannot be reached (connection refused, reset, timed out) make it unreachable at once.
#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/messaging/engine.hpp"

namespace tether::messaging {
namespace {

constexpr std::uint32_t kPassesPerLivenessCheck = 64;  // keeps the clock off the hot path

double seconds(std::chrono::nanoseconds duration) { return std::chrono::duration<double>(duration).count(); }

}  // namespace

void Engine::watch_peer(int peer_rank) noexcept {
  if (watchable(peer_rank)) count_waiter(peer_rank);
}

// One more request or channel waits on the peer; the first puts it on the watch list.
void Engine::count_waiter(int peer_rank) noexcept {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  if (peer.waiting_requests++ > 0) return;
  peer.watch_restarted = true;
  if (peer.watched) return;
  peer.watched = true;
  watched_peers_.push_back(peer_rank);
}

void Engine::unwatch_peer(int peer_rank) noexcept {
  if (!watchable(peer_rank)) return;
  --peers_[static_cast<std::size_t>(peer_rank)].waiting_requests;
}

void Engine::check_liveness() noexcept {
  if (watched_peers_.empty() || ++passes_since_liveness_check_ < kPassesPerLivenessCheck) return;
  passes_since_liveness_check_ = 0;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < watched_peers_.size();) {
    int peer = watched_peers_[i];
    PeerState& state = peers_[static_cast<std::size_t>(peer)];
    if (state.waiting_requests == 0 || peer_dead(peer)) {
      state.watched = false;
      watched_peers_[i] = watched_peers_.back();
      watched_peers_.pop_back();
      continue;
    }
    check_peer(peer, now);
    ++i;
  }
}

void Engine::check_peer(int peer, Clock::time_point now) noexcept {
  PeerState& state = peers_[static_cast<std::size_t>(peer)];
  if (state.watch_restarted || state.heard_count != state.heard_count_seen) {
    state.watch_restarted = false;
    state.heard_count_seen = state.heard_count;
    state.heard_at = now;
    return;
  }
  const auto timeout = options_.peer_timeout;
  const auto quiet = now - state.heard_at;
  const bool probe_outstanding = state.probed_at > state.heard_at;
  if (!probe_outstanding && quiet >= timeout / 4) {
    state.probed_at = now;
    return send_probe(peer, MessageKind::probe);
  }
  if (probe_outstanding && quiet >= timeout && now - state.probed_at >= timeout / 2) {
    note_unreachable(peer, fmt::format("nothing came from it for {:.1f} s, not even the answer to a probe, while "
                                       "{} operation(s) waited on it (TETHER_PEER_TIMEOUT is {:g} s)",
                                       seconds(quiet), state.waiting_requests, seconds(timeout)));
  }
}

void Engine::send_probe(int peer, MessageKind kind) noexcept {
  auto resolved = resolve(peer);
  if (!resolved) {
    log::warn("runtime", "cannot probe rank {}: {}", peer, resolved.error().message());
    return;
  }
  MessageHeader header = make_header(kind, rank_, 0, 0, 0);
  (void)post_control(peer, &header, sizeof header);  // a lost probe is retried at the next check
}

// Any message (on_receive counted it) or channel landing (heard_from) is a sign of life;
// a probe needs an answer.
void Engine::on_probe(const DecodedMessage& message) noexcept {
  if (message.header.kind == MessageKind::probe)
    send_probe(static_cast<int>(message.header.source_rank), MessageKind::probe_ack);
}

void Engine::on_transport_peer_error(const transport::Completion& completion) noexcept {
  if (completion.error != Errc::peer_unreachable && completion.error != Errc::timeout) return;
  for (int peer = 0; peer < size_; ++peer) {
    if (peers_[static_cast<std::size_t>(peer)].transport_peer != completion.peer || peer == rank_) continue;
    return note_unreachable(peer, fmt::format("{} reports: {} ({})", transport_->name(), completion.cause,
                                              errc_name(completion.error)));
  }
}

void Engine::note_unreachable(int peer, std::string why) noexcept {
  if (peer < 0 || peer >= size_ || dead_[static_cast<std::size_t>(peer)]->load()) return;
  std::string reason = fmt::format("{} is unreachable: {}", describe_peer(peer), why);
  log::error("runtime", "{}; requests with it fail", reason);
  (void)mark_dead(peer, std::move(reason));
}

// Returns whether this call turned the peer dead. An empty reason leaves the peer's
// failure to be told by the lost server's reason.
bool Engine::mark_dead(int peer, std::string reason) noexcept {
  if (peer < 0 || peer >= size_ || peer == rank_ || dead_[static_cast<std::size_t>(peer)]->load()) return false;
  if (!reason.empty()) record_failure_reason(peer, std::move(reason));
  if (dead_[static_cast<std::size_t>(peer)]->exchange(true)) return false;
  deaths_.fetch_add(1);
  return true;
}

void Engine::record_failure_reason(int peer, std::string why) noexcept {
  try {
    std::lock_guard lock(failure_reasons_mutex_);
    if (failure_reasons_.empty()) failure_reasons_.resize(static_cast<std::size_t>(size_));
    auto& reason = failure_reasons_[static_cast<std::size_t>(peer)];
    if (reason.empty()) reason = std::move(why);
  } catch (...) {
  }
}

// Formats outside the lock: describe_peer asks PMIx, whose event thread may be waiting
// for this lock in note_death.
std::string Engine::failure_reason(int peer) const {
  if (auto recorded = recorded_failure(peer)) return *recorded;
  bool dead = peer >= 0 && peer < size_ && dead_[static_cast<std::size_t>(peer)]->load();
  return fmt::format("{} {}", describe_peer(peer), dead ? "died" : "could not be reached (the log above says why)");
}

std::optional<std::string> Engine::recorded_failure(int peer) const {
  std::lock_guard lock(failure_reasons_mutex_);
  if (has_own_failure_locked(peer)) return failure_reasons_[static_cast<std::size_t>(peer)];
  if (!server_lost_reason_.empty()) return server_lost_reason_;
  return std::nullopt;
}

bool Engine::has_own_failure_locked(int peer) const noexcept {
  return peer >= 0 && static_cast<std::size_t>(peer) < failure_reasons_.size() &&
         !failure_reasons_[static_cast<std::size_t>(peer)].empty();
}

std::string Engine::failure_remedy(int peer, std::string_view otherwise) const {
  std::lock_guard lock(failure_reasons_mutex_);
  if (!has_own_failure_locked(peer) && !server_lost_reason_.empty())
    return "the launcher (tether-run, mpirun or srun) is gone, so the job cannot go on: find why it ended "
           "(killed, out of memory, its node lost) and start the job again";
  return std::string(otherwise);
}

std::string Engine::describe_peer(int peer) const {
  std::string host = bootstrap_->host_of(peer);
  return host.empty() ? fmt::format("rank {}", peer) : fmt::format("rank {} on host {}", peer, host);
}

}  // namespace tether::messaging
