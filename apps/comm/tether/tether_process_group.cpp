#include "apps/comm/tether/tether_process_group.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "runtime/bootstrap/bootstrap.hpp"

namespace tether::apps {

Error TetherProcessGroup::runtime_error(const char* what) const {
  Error error = runtime_->last_error();
  error.cause = fmt::format("{}: {}", what, error.cause);
  return error;
}

Expected<std::vector<std::byte>> TetherProcessGroup::gather_to_root(std::span<const std::byte> mine) {
  Runtime& rt = *runtime_;
  if (rt.rank() != 0) {
    Request send;
    if (rt.isend(mine.data(), mine.size(), 0, kCollectiveTag, send) == Status::error ||
        rt.wait(send) != Status::done)
      return tl::unexpected(runtime_error("gather send"));
    return std::vector<std::byte>{};
  }
  std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(rt.size()));
  std::copy(mine.begin(), mine.end(), all.begin());
  std::vector<Request> receives(static_cast<std::size_t>(rt.size()));
  for (int peer = 1; peer < rt.size(); ++peer)
    if (rt.irecv(all.data() + mine.size() * static_cast<std::size_t>(peer), mine.size(), peer, kCollectiveTag,
                 receives[static_cast<std::size_t>(peer)]) == Status::error)
      return tl::unexpected(runtime_error("gather receive"));
  if (rt.wait_all(receives) != Status::done) return tl::unexpected(runtime_error("gather"));
  return all;
}

Expected<void> TetherProcessGroup::broadcast_from_root(std::span<std::byte> data) {
  Runtime& rt = *runtime_;
  std::vector<Request> requests(static_cast<std::size_t>(rt.size()));
  if (rt.rank() == 0) {
    for (int peer = 1; peer < rt.size(); ++peer)
      if (rt.isend(data.data(), data.size(), peer, kCollectiveTag + 1, requests[static_cast<std::size_t>(peer)]) ==
          Status::error)
        return tl::unexpected(runtime_error("broadcast send"));
  } else if (rt.irecv(data.data(), data.size(), 0, kCollectiveTag + 1, requests[0]) == Status::error) {
    return tl::unexpected(runtime_error("broadcast receive"));
  }
  if (rt.wait_all(requests) != Status::done) return tl::unexpected(runtime_error("broadcast"));
  return {};
}

Expected<std::shared_ptr<Runtime>> shared_runtime() {
  static std::weak_ptr<Runtime> current;
  if (auto alive = current.lock()) return alive;
  auto started = Runtime::start();
  if (!started) return tl::unexpected(started.error());
  std::shared_ptr<Runtime> runtime(std::move(*started));
  current = runtime;
  return runtime;
}

// Every tether mode of the run finishes in the same order on every rank: the barriers pair up.
Expected<void> TetherProcessGroup::finish() {
  auto done = runtime_->barrier();
  runtime_.reset();
  return done;
}

void TetherProcessGroup::abort_job(int exit_code) noexcept {
  runtime_->bootstrap().abort(exit_code, "a halo app rank failed");
}

PinnedMessageBuffers::PinnedMessageBuffers(const HaloPattern& pattern) {
  for (const HaloMessage& message : pattern.sends) sends.emplace_back(message.doubles);
  for (const HaloMessage& message : pattern.receives) receives.emplace_back(message.doubles);
}

}  // namespace tether::apps
