// Bootstrap data exchange: put/commit, lazy get of one peer's bytes, fence.
#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <pmix.h>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/bootstrap/peer_health.hpp"
#include "runtime/bootstrap/pmix_values.hpp"

namespace tether {
namespace {

Expected<std::string> checked_key(std::string_view key) {
  if (key.empty() || key.size() > PMIX_MAX_KEYLEN) {
    return make_error(Errc::invalid_argument,
                      fmt::format("bootstrap key '{:.40}{}' has {} characters", key, key.size() > 40 ? "..." : "",
                                  key.size()),
                      fmt::format("use a key of 1 to {} characters", PMIX_MAX_KEYLEN));
  }
  return std::string(key);
}

std::vector<std::byte> bytes_of(const pmix_value_t* value) {
  if (value == nullptr || value->type != PMIX_BYTE_OBJECT || value->data.bo.bytes == nullptr) return {};
  const auto* first = reinterpret_cast<const std::byte*>(value->data.bo.bytes);
  return std::vector<std::byte>(first, first + value->data.bo.size);
}

void on_value(pmix_status_t status, pmix_value_t* value, void* cbdata) {
  auto call = pmix::PendingCall::from_cbdata(cbdata);
  if (status == PMIX_SUCCESS && (value == nullptr || value->type != PMIX_BYTE_OBJECT)) {
    status = PMIX_ERR_TYPE_MISMATCH;
  }
  call->complete(status, bytes_of(value));
}

void on_fence_done(pmix_status_t status, void* cbdata) {
  pmix::PendingCall::from_cbdata(cbdata)->complete(status);
}

Error pmix_failure(std::string_view call, pmix_status_t rc, std::string remedy) {
  return Error{Errc::peer_unreachable, rc, fmt::format("{} failed: {}", call, pmix::status_text(rc)),
               std::move(remedy)};
}

}  // namespace

Expected<void> Bootstrap::put(std::string_view key, std::span<const std::byte> bytes) {
  auto name = checked_key(key);
  if (!name) return tl::unexpected(name.error());
  pmix_value_t value;
  PMIX_VALUE_CONSTRUCT(&value);
  value.type = PMIX_BYTE_OBJECT;
  value.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
  value.data.bo.size = bytes.size();
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, name->c_str(), &value);  // PMIx copies the bytes
  if (rc != PMIX_SUCCESS) {
    return tl::unexpected(pmix_failure(fmt::format("PMIx_Put('{}', {} bytes)", key, bytes.size()), rc,
                                       "check the launcher's PMIx server is still running"));
  }
  return {};
}

Expected<void> Bootstrap::commit() {
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) {
    return tl::unexpected(pmix_failure("PMIx_Commit", rc, "check the launcher's PMIx server is still running"));
  }
  return {};
}

Expected<void> Bootstrap::publish() {
  if (auto committed = commit(); !committed) return committed;
  if (!config::Config::global().flag("TETHER_BOOTSTRAP_PREEXCHANGE")) return {};
  return fence(FenceData::collect);
}

// A peer still starting has not committed yet: servers that answer NOT-FOUND at once
// (tether-run's) get asked again, with a growing pause, until the bootstrap timeout. So do
// early TIMEOUT answers: PMIx 4.2 gives them for a rank on another node that is slow to
// commit (tether-run --netns with packet loss), long before TETHER_BOOTSTRAP_TIMEOUT.
Expected<std::vector<std::byte>> Bootstrap::get(int peer, std::string_view key) {
  const auto started = std::chrono::steady_clock::now();
  auto deadline = started + timeout_;
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    auto bytes = get_once(peer, key);
    bool timed_out = !bytes && bytes.error().sys_errno == PMIX_ERR_TIMEOUT;
    bool not_yet = timed_out || (!bytes && bytes.error().sys_errno == PMIX_ERR_NOT_FOUND);
    if (!not_yet || (timeout_.count() > 0 && std::chrono::steady_clock::now() > deadline)) return bytes;
    if (timed_out)
      log::info("bootstrap", "get of '{}' from rank {}: PMIx answered TIMEOUT {:.3f} s after the first try; asking again",
                key, peer, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(50));
  }
}

Expected<std::vector<std::byte>> Bootstrap::get_once(int peer, std::string_view key) {
  if (auto alive = check_peer(peer); !alive) return tl::unexpected(alive.error());
  auto name = checked_key(key);
  if (!name) return tl::unexpected(name.error());
  const pmix_proc_t proc = pmix::make_proc(identity_.job_id, static_cast<pmix_rank_t>(peer));
  auto call = std::make_shared<pmix::PendingCall>();
  void* cbdata = pmix::PendingCall::to_cbdata(call);
  pmix_status_t rc = PMIx_Get_nb(&proc, name->c_str(), nullptr, 0, on_value, cbdata);
  if (rc != PMIX_SUCCESS) {
    pmix::PendingCall::from_cbdata(cbdata);  // no callback will come: free its copy
    return tl::unexpected(pmix_failure(fmt::format("PMIx_Get_nb(rank {}, '{}')", peer, key), rc,
                                       "check the launcher's PMIx server is still running"));
  }
  auto waited = call->wait(timeout_, fmt::format("get of '{}' from rank {}", key, peer),
                           [this, peer]() -> std::optional<Error> {
                             if (auto alive = check_peer(peer); !alive) return alive.error();
                             return std::nullopt;
                           });
  if (!waited) return tl::unexpected(waited.error());
  if (*waited == PMIX_ERR_NOT_FOUND || *waited == PMIX_ERR_TIMEOUT) {
    if (auto alive = check_peer(peer); !alive) return tl::unexpected(alive.error());
    return make_error(*waited == PMIX_ERR_NOT_FOUND ? Errc::invalid_argument : Errc::timeout,
                      fmt::format("rank {} has published nothing under '{}' ({})", peer, key,
                                  pmix::status_text(*waited)),
                      "make every rank put() the key and commit() before peers get() it", *waited);
  }
  if (*waited != PMIX_SUCCESS) {
    if (auto alive = check_peer(peer); !alive) return tl::unexpected(alive.error());
    return tl::unexpected(pmix_failure(fmt::format("get of '{}' from rank {}", key, peer), *waited,
                                       "check that rank's output for why it could not publish"));
  }
  return call->take_bytes();
}

Expected<void> Bootstrap::fence(FenceData data) { return fence_once(data, {}, timeout_); }

Expected<void> Bootstrap::fence_while(const std::function<void()>& keep_busy, std::chrono::nanoseconds limit) {
  return fence_once(FenceData::barrier_only, keep_busy, limit.count() > 0 ? limit : timeout_);
}

Expected<void> Bootstrap::fence_once(FenceData data, const std::function<void()>& keep_busy,
                                     std::chrono::nanoseconds limit) {
  if (auto alive = check_all_peers(); !alive) return alive;
  pmix_info_t collect;
  PMIX_INFO_CONSTRUCT(&collect);
  bool collect_data = data == FenceData::collect;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &collect_data, PMIX_BOOL);
  auto call = std::make_shared<pmix::PendingCall>();
  void* cbdata = pmix::PendingCall::to_cbdata(call);
  pmix_status_t rc = PMIx_Fence_nb(nullptr, 0, &collect, 1, on_fence_done, cbdata);
  PMIX_INFO_DESTRUCT(&collect);
  if (rc != PMIX_SUCCESS) {
    pmix::PendingCall::from_cbdata(cbdata);  // no callback will come: free its copy
    return tl::unexpected(pmix_failure("PMIx_Fence_nb", rc, "check the launcher's PMIx server is still running"));
  }
  auto waited = call->wait(limit, fmt::format("fence of {} ranks", identity_.size),
                           [this, &keep_busy]() -> std::optional<Error> {
                             if (keep_busy) keep_busy();
                             if (auto alive = check_all_peers(); !alive) return alive.error();
                             return std::nullopt;
                           });
  if (!waited) return tl::unexpected(waited.error());
  if (*waited != PMIX_SUCCESS) {
    if (auto alive = check_all_peers(); !alive) return alive;
    return tl::unexpected(pmix_failure("fence", *waited, "check the other ranks' output"));
  }
  return {};
}

}  // namespace tether
