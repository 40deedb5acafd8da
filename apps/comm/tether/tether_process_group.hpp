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
  explicit TetherProcessGroup(std::unique_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

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
  std::unique_ptr<Runtime> runtime_;
};

// Starts tether's runtime (PMIx bootstrap: tether-run, mpirun, srun) under `Backend`.
template <class Backend>
Expected<std::unique_ptr<CommBackend>> start_tether_process_group() {
  auto runtime = Runtime::start();
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
