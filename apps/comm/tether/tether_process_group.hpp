// tether::Runtime as a CommBackend minus the exchange: rank, size, barrier and the
// gather/broadcast the shared code uses for timing, verification and the heat map.
#pragma once

#include <memory>
#include <vector>

#include "apps/comm/comm.hpp"
#include "tether/pool.hpp"
#include "tether/runtime.hpp"

namespace tether::apps {

// Collectives use tags from here up, above any halo tag.
inline constexpr int kCollectiveTag = 1 << 30;

class TetherProcessGroup : public CommBackend {
 public:
  explicit TetherProcessGroup(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

  int rank() const noexcept override { return runtime_->rank(); }
  int size() const noexcept override { return runtime_->size(); }
  Expected<void> barrier() override { return runtime_->barrier(); }
  Expected<std::vector<std::byte>> gather_to_root(std::span<const std::byte> mine) override;
  Expected<void> broadcast_from_root(std::span<std::byte> data) override;
  Expected<void> finish() override;
  [[noreturn]] void abort_job(int exit_code) noexcept override;

 protected:
  [[nodiscard]] Runtime& runtime() noexcept { return *runtime_; }
  [[nodiscard]] Error runtime_error(const char* what) const;

 private:
  std::shared_ptr<Runtime> runtime_;  // shared by the tether modes of one run
};

// This process's tether runtime: started on first use (PMIx bootstrap: tether-run, mpirun,
// srun), then shared by every tether mode of the run (--comm persist,sendrecv) until the
// last one finishes.
[[nodiscard]] Expected<std::shared_ptr<Runtime>> shared_runtime();

// Starts `Backend` over the shared runtime.
template <class Backend>
Expected<std::unique_ptr<CommBackend>> start_tether_process_group() {
  auto runtime = shared_runtime();
  if (!runtime) return tl::unexpected(runtime.error());
  return std::make_unique<Backend>(std::move(*runtime));
}

// Pinned buffers for a pattern: one vector per message, owned by the exchange.
struct PinnedMessageBuffers {
  explicit PinnedMessageBuffers(const HaloPattern& pattern);
  std::vector<std::vector<double, pinned_allocator<double>>> sends;
  std::vector<std::vector<double, pinned_allocator<double>>> receives;
};

}  // namespace tether::apps
