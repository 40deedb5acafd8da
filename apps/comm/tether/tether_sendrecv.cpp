// --comm sendrecv: every iteration posts one tether irecv per receive and one isend per
// send (start()), then makes one progress pass (starts make none: rendezvous handshakes
// that can begin do so before the interior is computed), and wait() waits for all.
#include "apps/comm/tether/tether_backend.hpp"
#include "apps/comm/tether/tether_process_group.hpp"
#include "runtime/base/log.hpp"

namespace tether::apps {
namespace {

class TetherSendRecvExchange final : public HaloExchange {
 public:
  TetherSendRecvExchange(Runtime& runtime, const HaloPattern& pattern)
      : runtime_(runtime), pattern_(pattern), buffers_(pattern),
        requests_(pattern.sends.size() + pattern.receives.size()) {}

  std::span<double> send_buffer(std::size_t index) noexcept override { return buffers_.sends[index]; }
  std::span<const double> receive_buffer(std::size_t index) noexcept override { return buffers_.receives[index]; }

  Status start() noexcept override {
    std::size_t next = 0;
    for (std::size_t i = 0; i < pattern_.receives.size(); ++i) {
      const HaloMessage& message = pattern_.receives[i];
      if (runtime_.irecv(buffers_.receives[i].data(), message.doubles * sizeof(double), message.peer, message.tag,
                         requests_[next++]) == Status::error)
        return fail("irecv");
    }
    for (std::size_t i = 0; i < pattern_.sends.size(); ++i) {
      const HaloMessage& message = pattern_.sends[i];
      if (runtime_.isend(buffers_.sends[i].data(), message.doubles * sizeof(double), message.peer, message.tag,
                         requests_[next++]) == Status::error)
        return fail("isend");
    }
    runtime_.progress();
    return Status::done;
  }

  Status wait() noexcept override {
    return runtime_.wait_all(std::span(requests_)) == Status::done ? Status::done : fail("wait_all");
  }

 private:
  Status fail(const char* call) noexcept {
    log::error("apps", "{} failed: {}", call, runtime_.last_error().message());
    return Status::error;
  }

  Runtime& runtime_;
  HaloPattern pattern_;
  PinnedMessageBuffers buffers_;
  std::vector<Request> requests_;
};

class TetherSendRecvBackend final : public TetherProcessGroup {
 public:
  using TetherProcessGroup::TetherProcessGroup;
  Expected<std::unique_ptr<HaloExchange>> create_exchange(const HaloPattern& pattern) override {
    return std::make_unique<TetherSendRecvExchange>(runtime(), pattern);
  }
};

}  // namespace

Expected<std::unique_ptr<CommBackend>> start_tether_sendrecv_backend(int&, char**&) {
  return start_tether_process_group<TetherSendRecvBackend>();
}

}  // namespace tether::apps
