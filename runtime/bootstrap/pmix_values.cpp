// Helpers over PMIx types and the PendingCall wait.
#include "runtime/bootstrap/pmix_values.hpp"

#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace tether::pmix {

std::string status_text(pmix_status_t status) {
  return fmt::format("{} ({})", PMIx_Error_string(status), status);
}

pmix_proc_t make_proc(std::string_view job_id, pmix_rank_t rank) {
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  std::memcpy(proc.nspace, job_id.data(), std::min(job_id.size(), std::size_t{PMIX_MAX_NSLEN}));
  proc.rank = rank;
  return proc;
}

std::optional<std::uint64_t> as_number(const pmix_value_t& value) {
  switch (value.type) {
    case PMIX_UINT8: return value.data.uint8;
    case PMIX_UINT16: return value.data.uint16;
    case PMIX_UINT32: return value.data.uint32;
    case PMIX_UINT64: return value.data.uint64;
    case PMIX_SIZE: return value.data.size;
    case PMIX_PROC_RANK: return value.data.rank;
    case PMIX_INT: return value.data.integer < 0 ? std::nullopt : std::optional<std::uint64_t>(value.data.integer);
    case PMIX_INT32: return value.data.int32 < 0 ? std::nullopt : std::optional<std::uint64_t>(value.data.int32);
    case PMIX_INT64: return value.data.int64 < 0 ? std::nullopt : std::optional<std::uint64_t>(value.data.int64);
    default: return std::nullopt;
  }
}

namespace {

std::optional<int> parse_int(std::string_view text) {
  int number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size() || number < 0) return std::nullopt;
  return number;
}

}  // namespace

// More than any node holds; a longer list is malformed (and would take gigabytes).
constexpr int kMostListedRanks = 1 << 20;

std::optional<std::vector<int>> parse_rank_list(std::string_view text) {
  std::vector<int> ranks;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    auto dash = item.find('-');
    auto first = parse_int(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : parse_int(item.substr(dash + 1));
    if (!first || !last || *last < *first || *last - *first >= kMostListedRanks - static_cast<int>(ranks.size()))
      return std::nullopt;
    for (int offset = 0; offset <= *last - *first; ++offset) ranks.push_back(*first + offset);
  }
  return ranks;
}

void PendingCall::complete(pmix_status_t status, std::vector<std::byte> bytes) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    status_ = status;
    bytes_ = std::move(bytes);
  }
  done_cv_.notify_all();
}

Expected<pmix_status_t> PendingCall::wait(std::chrono::nanoseconds timeout, std::string_view what,
                                          const std::function<std::optional<Error>()>& give_up) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kSlice = std::chrono::milliseconds(20);
  const auto start = Clock::now();
  std::unique_lock lock(mutex_);
  while (!done_cv_.wait_for(lock, kSlice, [this] { return done_; })) {
    lock.unlock();
    if (auto error = give_up()) return tl::unexpected(std::move(*error));
    if (timeout.count() > 0 && Clock::now() - start > timeout) {
      return make_error(Errc::timeout,
                        fmt::format("{} did not complete within {} ms", what,
                                    std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()),
                        "a peer may be stuck before this point; raise TETHER_BOOTSTRAP_TIMEOUT "
                        "if it is only slow");
    }
    lock.lock();
  }
  return status_;
}

std::vector<std::byte> PendingCall::take_bytes() {
  std::lock_guard lock(mutex_);
  return std::move(bytes_);
}

void* PendingCall::to_cbdata(const std::shared_ptr<PendingCall>& call) {
  return new std::shared_ptr<PendingCall>(call);
}

std::shared_ptr<PendingCall> PendingCall::from_cbdata(void* cbdata) {
  auto* holder = static_cast<std::shared_ptr<PendingCall>*>(cbdata);
  auto call = std::move(*holder);
  delete holder;
  return call;
}

}  // namespace tether::pmix
