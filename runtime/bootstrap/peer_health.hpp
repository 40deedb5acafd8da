// PeerHealth: which ranks of this job are known dead, fed by PMIx event notifications
// (process-wide, because PMIx event handlers are process-wide and carry no user pointer).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tether/error.hpp"

namespace tether {

class PeerHealth {
 public:
  using DeathCallback = std::function<void(int peer, std::string_view why)>;
  // The peer a callback names when the PMIx server was lost: the job is over for every rank.
  static constexpr int kEveryPeer = -1;

  static PeerHealth& instance();

  // Registers the PMIx event handler once per process for `job_id`'s ranks.
  Expected<void> watch(const std::string& job_id);
  void mark_dead(int rank, std::string why);
  void mark_server_lost(std::string why);
  // Replaces the callback; returns once no call of the old one is running, so its owner
  // may be destroyed right after set_callback(nullptr). The deaths and lost server known
  // by then are replayed to the new callback, on the calling thread, before it returns.
  void set_callback(DeathCallback callback);

  // Why `rank` is dead (or why the server is gone), nullopt while it is believed alive.
  [[nodiscard]] std::optional<std::string> why_unreachable(int rank) const;
  // The lowest dead rank and why, or the lost server (rank -1).
  [[nodiscard]] std::optional<std::pair<int, std::string>> first_unreachable() const;
  [[nodiscard]] const std::string& job_id() const { return job_id_; }

 private:
  mutable std::mutex mutex_;
  std::string job_id_;
  bool watching_ = false;
  std::map<int, std::string> dead_;
  std::string server_lost_;  // empty while connected
  std::mutex callback_mutex_;  // held while the callback runs and while it is replaced
  DeathCallback callback_;
};

}  // namespace tether
