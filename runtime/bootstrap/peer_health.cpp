// PeerHealth: the PMIx event handler that records dead peers and a lost server.
#include "runtime/bootstrap/peer_health.hpp"

#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <pmix.h>

#include "runtime/base/log.hpp"
#include "runtime/bootstrap/pmix_values.hpp"

namespace tether {
namespace {

// Events meaning "this peer is gone"; a normal exit (PMIX_EVENT_PROC_TERMINATED) is not one.
pmix_status_t kDeathEvents[] = {PMIX_ERR_PROC_ABORTED, PMIX_ERR_PROC_ABORTING,
                                PMIX_ERR_PROC_TERM_WO_SYNC, PMIX_ERR_PROC_REQUESTED_ABORT,
                                PMIX_ERR_LOST_CONNECTION};

const pmix_proc_t* affected_proc(const pmix_proc_t* source, const pmix_info_t* info, size_t ninfo) {
  for (size_t i = 0; i < ninfo; ++i) {
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
      return info[i].value.data.proc;
  }
  return source;
}

std::string event_text(pmix_status_t status, const pmix_info_t* info, size_t ninfo) {
  std::string text = PMIx_Error_string(status);
  for (size_t i = 0; i < ninfo; ++i) {
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_TEXT_MESSAGE) && info[i].value.type == PMIX_STRING &&
        info[i].value.data.string != nullptr)
      text = info[i].value.data.string;
  }
  return text;
}

void record_event(pmix_status_t status, const pmix_proc_t* source, const pmix_info_t* info,
                  size_t ninfo) {
  auto& health = PeerHealth::instance();
  std::string why = event_text(status, info, ninfo);
  if (status == PMIX_ERR_LOST_CONNECTION) {
    health.mark_server_lost(std::move(why));
    return;
  }
  const pmix_proc_t* proc = affected_proc(source, info, ninfo);
  if (proc == nullptr || !PMIX_CHECK_NSPACE(proc->nspace, health.job_id().c_str())) return;
  if (proc->rank == PMIX_RANK_WILDCARD) {
    health.mark_server_lost(fmt::format("the whole job was reported gone: {}", why));
    return;
  }
  if (!PMIX_RANK_IS_VALID(proc->rank) || proc->rank > static_cast<pmix_rank_t>(INT_MAX)) {
    log::info("bootstrap", "ignored an event naming no rank ({:#x}): {}", proc->rank, why);
    return;
  }
  health.mark_dead(static_cast<int>(proc->rank), std::move(why));
}

void on_pmix_event(size_t, pmix_status_t status, const pmix_proc_t* source, pmix_info_t info[],
                   size_t ninfo, pmix_info_t*, size_t, pmix_event_notification_cbfunc_fn_t done,
                   void* done_data) {
  record_event(status, source, info, ninfo);
  if (done != nullptr) done(PMIX_SUCCESS, nullptr, 0, nullptr, nullptr, done_data);
}

void on_registered(pmix_status_t status, size_t, void* cbdata) {
  pmix::PendingCall::from_cbdata(cbdata)->complete(status);
}

}  // namespace

PeerHealth& PeerHealth::instance() {
  static PeerHealth* health = new PeerHealth();  // never destroyed: PMIx may call late
  return *health;
}

Expected<void> PeerHealth::watch(const std::string& job_id) {
  {
    std::lock_guard lock(mutex_);
    if (watching_) return {};
    job_id_ = job_id;
    watching_ = true;
  }
  auto call = std::make_shared<pmix::PendingCall>();
  void* cbdata = pmix::PendingCall::to_cbdata(call);
  pmix_status_t rc = PMIx_Register_event_handler(kDeathEvents, std::size(kDeathEvents), nullptr, 0,
                                                 on_pmix_event, on_registered, cbdata);
  if (rc != PMIX_SUCCESS) pmix::PendingCall::from_cbdata(cbdata);  // no callback will come
  if (rc == PMIX_SUCCESS) {
    auto waited = call->wait(std::chrono::seconds(30), "PMIx event handler registration",
                             [] { return std::optional<Error>(); });
    if (!waited) return tl::unexpected(waited.error());
    rc = *waited;
  }
  if (rc < 0) {
    return make_error(Errc::unsupported,
                      fmt::format("PMIx_Register_event_handler failed: {}", pmix::status_text(rc)),
                      "peer deaths cannot be detected; check the launcher's PMIx version", rc);
  }
  return {};
}

void PeerHealth::mark_dead(int rank, std::string why) {
  if (rank < 0) return;  // kEveryPeer is the lost server's, and no rank is negative
  {
    std::lock_guard lock(mutex_);
    if (!dead_.emplace(rank, why).second) return;
  }
  log::warn("bootstrap", "rank {} died: {}", rank, why);
  std::lock_guard calling(callback_mutex_);
  if (callback_) callback_(rank, why);
}

// Without its server (the launcher killed, say) no rank of the job can be waited on any
// more: every peer counts as dead, so requests fail instead of two live ranks waiting on
// each other for ever.
void PeerHealth::mark_server_lost(std::string why) {
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    if (!server_lost_.empty()) return;
    server_lost_ = fmt::format("lost the PMIx server: {}", why);
    reason = server_lost_;
  }
  log::error("bootstrap", "{}; requests with every other rank fail", reason);
  std::lock_guard calling(callback_mutex_);
  if (callback_) callback_(kEveryPeer, reason);
}

// Deaths, and a lost server, reported before the callback was set are replayed to it; one
// reported meanwhile may reach it twice (the engine ignores a second report).
void PeerHealth::set_callback(DeathCallback callback) {
  std::lock_guard calling(callback_mutex_);
  callback_ = std::move(callback);
  if (!callback_) return;
  std::map<int, std::string> dead;
  std::string server_lost;
  {
    std::lock_guard lock(mutex_);
    dead = dead_;
    server_lost = server_lost_;
  }
  for (const auto& [rank, why] : dead) callback_(rank, why);
  if (!server_lost.empty()) callback_(kEveryPeer, server_lost);
}

std::optional<std::string> PeerHealth::why_unreachable(int rank) const {
  std::lock_guard lock(mutex_);
  if (auto found = dead_.find(rank); found != dead_.end()) return found->second;
  if (!server_lost_.empty()) return server_lost_;
  return std::nullopt;
}

std::optional<std::pair<int, std::string>> PeerHealth::first_unreachable() const {
  std::lock_guard lock(mutex_);
  if (!dead_.empty()) return *dead_.begin();
  if (!server_lost_.empty()) return std::pair<int, std::string>(-1, server_lost_);
  return std::nullopt;
}

}  // namespace tether
