// Bootstrap: who this process is in its job and how it swaps small blobs with its peers,
// over the PMIx client API. Works under any PMIx server: tether-run, mpirun, srun, prun.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tether/error.hpp"

namespace tether {

class PeerHealth;

// Where this process sits in its job; filled once by Bootstrap::connect().
struct JobIdentity {
  std::string job_id;          // PMIx namespace of the job
  int rank = -1;
  int size = 0;                // ranks in the job
  int local_rank = -1;         // index among the ranks on this node
  std::vector<int> local_peers;// job ranks on this node, ascending, this rank included
  std::string hostname;
  std::uint32_t node_id = 0;
};

enum class FenceData : std::uint8_t { barrier_only, collect };

class Bootstrap {
 public:
  // PMIx_Init. Fails with the launch commands when no launcher started this process.
  static Expected<std::unique_ptr<Bootstrap>> connect();
  ~Bootstrap();  // PMIx_Finalize
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  [[nodiscard]] const JobIdentity& identity() const { return identity_; }
  [[nodiscard]] int rank() const { return identity_.rank; }
  [[nodiscard]] int size() const { return identity_.size; }

  // Publishes `bytes` under `key` for every peer; visible to them after commit().
  Expected<void> put(std::string_view key, std::span<const std::byte> bytes);
  Expected<void> commit();
  // commit(), then one fence collecting all data when TETHER_BOOTSTRAP_PREEXCHANGE is on
  // (later get() calls are then local); otherwise peers fetch lazily on first get().
  Expected<void> publish();
  // A peer's bytes under `key`; waits until the peer commits them. Fails naming the peer
  // if it died, the server went away, or TETHER_BOOTSTRAP_TIMEOUT passed.
  Expected<std::vector<std::byte>> get(int peer, std::string_view key);
  // Waits for every rank of the job; fails naming the first rank known dead.
  Expected<void> fence(FenceData data = FenceData::barrier_only);
  // A barrier-only fence that calls `keep_busy` between waits (so a transport keeps
  // progressing) and gives up after `limit` (0: TETHER_BOOTSTRAP_TIMEOUT).
  Expected<void> fence_while(const std::function<void()>& keep_busy, std::chrono::nanoseconds limit);

  // Asks the launcher to end the whole job with `exit_code`; does not return.
  [[noreturn]] void abort(int exit_code, std::string_view reason);

  [[nodiscard]] bool peer_alive(int peer) const;
  // The host `peer` runs on, from the job data the launcher gave at start-up (never asks
  // the server, so it works when the server is out of reach); empty if it did not say.
  [[nodiscard]] std::string host_of(int peer) const;
  // Called from the PMIx event thread with the rank that died and why, or with
  // PeerHealth::kEveryPeer (-1) when the PMIx server was lost; what was known before is
  // replayed to it at once, on the calling thread.
  void on_peer_death(std::function<void(int peer, std::string_view why)> callback);

 private:
  explicit Bootstrap(JobIdentity identity);
  Expected<std::vector<std::byte>> get_once(int peer, std::string_view key);
  Expected<void> check_peer(int peer) const;
  Expected<void> check_all_peers() const;
  Expected<void> fence_once(FenceData data, const std::function<void()>& keep_busy, std::chrono::nanoseconds limit);

  JobIdentity identity_;
  std::chrono::nanoseconds timeout_;
  PeerHealth* health_;  // process-wide, outlives every Bootstrap
};

// "built with PMIx 4.2.2, running 4.2.2rc2 (...)" for tether-info -v.
[[nodiscard]] std::string pmix_version_text();

}  // namespace tether
