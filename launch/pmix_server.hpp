// PmixServer: the PMIx server library hosted by tether-run for one job. It
// registers the job's namespace and ranks, hands each rank its PMIx environment, serves
// fence and direct modex, and tells survivors when a rank dies.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launch/netns.hpp"
#include "launch/placement.hpp"
#include "tether/error.hpp"

namespace tether::launch {

// A rank's call to PMIx_Abort, handed from the PMIx thread to the launcher's loop.
// How far a rank's PMIx client got, as the PMIx thread reports it.
enum class ClientStage : std::uint8_t { not_connected, connected, finalized };

struct AbortRequest {
  int rank = -1;
  int exit_code = 1;
  std::string message;
};

class PmixServer {
 public:
  // PMIx_server_init with its files under `tmpdir`, then registers the placed ranks. The
  // server listens on loopback, or only on `listen_on` when the ranks run in other
  // network namespaces (--netns).
  static Expected<std::unique_ptr<PmixServer>> start(const std::string& tmpdir, Placement placement,
                                                     const std::optional<SharedInterface>& listen_on);
  ~PmixServer();  // deregisters the job, PMIx_server_finalize
  PmixServer(const PmixServer&) = delete;
  PmixServer& operator=(const PmixServer&) = delete;

  // Registers `rank` as a client; returns the NAME=value entries its environment needs.
  Expected<std::vector<std::string>> prepare_rank(int rank);
  // PMIx_Notify_event(PMIX_ERR_PROC_ABORTED) to the job, naming `rank` and `why`.
  void notify_death(int rank, int exit_code, const std::string& why);

  // Readable when an abort request is waiting; the launcher's loop polls it.
  [[nodiscard]] int wake_fd() const { return wake_fd_; }
  std::vector<AbortRequest> take_aborts();
  [[nodiscard]] ClientStage stage(int rank) const;
  [[nodiscard]] bool every_rank_finalized() const;
  [[nodiscard]] const std::string& job_id() const { return job_id_; }
  [[nodiscard]] const Placement& placement() const { return placement_; }

  // Called by the PMIx module callbacks (PMIx progress thread).
  void record_stage(int rank, ClientStage stage);
  void record_abort(AbortRequest request);

 private:
  PmixServer(std::string job_id, Placement placement, int wake_fd);
  Expected<void> register_job();

  std::string job_id_;
  Placement placement_;
  int ranks_;
  int wake_fd_;
  bool job_registered_ = false;
  std::unique_ptr<std::atomic<ClientStage>[]> stages_;
  std::mutex aborts_mutex_;
  std::vector<AbortRequest> aborts_;
};

}  // namespace tether::launch
