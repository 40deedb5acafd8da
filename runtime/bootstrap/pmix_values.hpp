// Small helpers over PMIx types: status text, numbers out of pmix_value_t, rank lists,
// and PendingCall, which turns a PMIx non-blocking call into a wait that can give up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pmix.h>

#include "tether/error.hpp"

namespace tether::pmix {

[[nodiscard]] std::string status_text(pmix_status_t status);
[[nodiscard]] pmix_proc_t make_proc(std::string_view job_id, pmix_rank_t rank);
[[nodiscard]] std::optional<std::uint64_t> as_number(const pmix_value_t& value);
// "0,2-4,7" -> {0, 2, 3, 4, 7}; nullopt when the text is not a rank list.
[[nodiscard]] std::optional<std::vector<int>> parse_rank_list(std::string_view text);

// The state a PMIx callback completes. Shared between the waiter and the callback, so a
// waiter that gave up (peer died, timeout) leaves a callback that fires later harmless.
class PendingCall {
 public:
  void complete(pmix_status_t status, std::vector<std::byte> bytes = {});
  // Waits for complete(); every slice asks `give_up` whether to stop waiting early. Returns
  // the PMIx status, or the error `give_up` returned, or a timeout error past `timeout`.
  Expected<pmix_status_t> wait(std::chrono::nanoseconds timeout, std::string_view what,
                               const std::function<std::optional<Error>()>& give_up);
  [[nodiscard]] std::vector<std::byte> take_bytes();

  // cbdata for PMIx: a heap copy of the shared pointer, deleted by the callback.
  static void* to_cbdata(const std::shared_ptr<PendingCall>& call);
  static std::shared_ptr<PendingCall> from_cbdata(void* cbdata);

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  pmix_status_t status_ = PMIX_SUCCESS;
  std::vector<std::byte> bytes_;
};

}  // namespace tether::pmix
