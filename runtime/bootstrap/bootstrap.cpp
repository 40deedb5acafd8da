// Bootstrap: PMIx_Init, the job identity, abort, and peer liveness.
#include "runtime/bootstrap/bootstrap.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include <fmt/format.h>
#include <pmix.h>
#include <pmix_version.h>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "runtime/bootstrap/peer_health.hpp"
#include "runtime/bootstrap/pmix_values.hpp"

namespace tether {
namespace {

constexpr std::string_view kLaunchHelp =
    "start it with a PMIx launcher: `tether-run -n N program`, `mpirun -n N program`, "
    "`srun --mpi=pmix -n N program` or `prun -n N program` (see launch/README.md)";

Expected<pmix_proc_t> init_pmix() {
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc == PMIX_SUCCESS) return me;
  if (rc == PMIX_ERR_UNREACH) {
    return make_error(Errc::peer_unreachable,
                      "no PMIx server to connect to: this process was not started by a launcher",
                      std::string(kLaunchHelp), rc);
  }
  return make_error(Errc::peer_unreachable, fmt::format("PMIx_Init failed: {}", pmix::status_text(rc)),
                    fmt::format("check that the launcher supports PMIx 4; {}", kLaunchHelp), rc);
}

// Fetches one value; `fetch` turns it into T while the pmix_value_t is still alive.
template <class T, class Fetch>
std::optional<T> query(const pmix_proc_t& proc, const char* key, Fetch fetch) {
  pmix_value_t* value = nullptr;
  if (PMIx_Get(&proc, key, nullptr, 0, &value) != PMIX_SUCCESS || value == nullptr) return std::nullopt;
  std::optional<T> result = fetch(*value);
  PMIX_VALUE_RELEASE(value);
  return result;
}

std::optional<std::uint64_t> query_number(const pmix_proc_t& proc, const char* key) {
  return query<std::uint64_t>(proc, key, [](const pmix_value_t& v) { return pmix::as_number(v); });
}

std::optional<std::string> query_text(const pmix_proc_t& proc, const char* key) {
  return query<std::string>(proc, key, [](const pmix_value_t& v) -> std::optional<std::string> {
    if (v.type != PMIX_STRING || v.data.string == nullptr) return std::nullopt;
    return std::string(v.data.string);
  });
}

std::string own_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

Expected<JobIdentity> read_identity(const pmix_proc_t& me) {
  JobIdentity identity;
  identity.job_id = me.nspace;
  identity.rank = static_cast<int>(me.rank);
  const pmix_proc_t job = pmix::make_proc(me.nspace, PMIX_RANK_WILDCARD);
  auto size = query_number(job, PMIX_JOB_SIZE);
  if (!size || *size == 0) {
    return make_error(Errc::unsupported, "the PMIx server does not report the job size (PMIX_JOB_SIZE)",
                      "use a launcher that registers job information: tether-run, mpirun, srun, prun");
  }
  if (*size > static_cast<std::uint64_t>(INT_MAX) || me.rank >= *size) {
    return make_error(Errc::unsupported,
                      fmt::format("the PMIx server reports rank {} in a job of {} ranks", me.rank, *size),
                      "use a launcher that registers job information: tether-run, mpirun, srun, prun");
  }
  identity.size = static_cast<int>(*size);
  identity.local_rank = static_cast<int>(query_number(me, PMIX_LOCAL_RANK).value_or(0));
  auto peers = query_text(job, PMIX_LOCAL_PEERS);
  if (peers) identity.local_peers = pmix::parse_rank_list(*peers).value_or(std::vector<int>());
  if (peers && identity.local_peers.empty())
    log::warn("bootstrap", "the PMIx server's local peers '{}' are not a rank list: this rank counts as alone on its "
              "node", *peers);
  if (identity.local_peers.empty()) identity.local_peers.push_back(identity.rank);
  identity.hostname = query_text(me, PMIX_HOSTNAME).value_or(own_hostname());
  identity.node_id = static_cast<std::uint32_t>(query_number(me, PMIX_NODEID).value_or(0));
  return identity;
}

}  // namespace

Expected<std::unique_ptr<Bootstrap>> Bootstrap::connect() {
  auto me = init_pmix();
  if (!me) return tl::unexpected(me.error());
  auto identity = read_identity(*me);
  if (!identity) {
    PMIx_Finalize(nullptr, 0);
    return tl::unexpected(identity.error());
  }
  log::set_rank(identity->rank);
  if (auto watched = PeerHealth::instance().watch(identity->job_id); !watched) {
    log::warn("bootstrap", "{}", watched.error().message());
  }
  log::info("bootstrap", "rank {} of {} in job {} on {} (local rank {}, {} local peers)", identity->rank,
            identity->size, identity->job_id, identity->hostname, identity->local_rank,
            identity->local_peers.size());
  return std::unique_ptr<Bootstrap>(new Bootstrap(std::move(*identity)));
}

Bootstrap::Bootstrap(JobIdentity identity)
    : identity_(std::move(identity)),
      timeout_(config::Config::global().duration("TETHER_BOOTSTRAP_TIMEOUT")),
      health_(&PeerHealth::instance()) {}

Bootstrap::~Bootstrap() {
  pmix_status_t rc = PMIx_Finalize(nullptr, 0);
  if (rc != PMIX_SUCCESS) log::warn("bootstrap", "PMIx_Finalize failed: {}", pmix::status_text(rc));
}

void Bootstrap::abort(int exit_code, std::string_view reason) {
  std::string message(reason);
  log::error("bootstrap", "aborting the job with exit code {}: {}", exit_code, message);
  pmix_status_t rc = PMIx_Abort(exit_code, message.c_str(), nullptr, 0);
  if (rc != PMIX_SUCCESS) log::error("bootstrap", "PMIx_Abort failed: {}", pmix::status_text(rc));
  std::_Exit(exit_code == 0 ? 1 : exit_code);
}

std::string pmix_version_text() {
  return fmt::format("built with PMIx {}.{}.{}, running {}", PMIX_VERSION_MAJOR, PMIX_VERSION_MINOR,
                     PMIX_VERSION_RELEASE, PMIx_Get_version());
}

std::string Bootstrap::host_of(int peer) const {
  if (peer == identity_.rank) return identity_.hostname;
  pmix_info_t optional;
  bool local_only = true;
  PMIX_INFO_LOAD(&optional, PMIX_OPTIONAL, &local_only, PMIX_BOOL);
  const pmix_proc_t proc = pmix::make_proc(identity_.job_id, static_cast<pmix_rank_t>(peer));
  pmix_value_t* value = nullptr;
  std::string host;
  if (PMIx_Get(&proc, PMIX_HOSTNAME, &optional, 1, &value) == PMIX_SUCCESS && value != nullptr) {
    if (value->type == PMIX_STRING && value->data.string != nullptr) host = value->data.string;
    PMIX_VALUE_RELEASE(value);
  }
  PMIX_INFO_DESTRUCT(&optional);
  return host;
}

bool Bootstrap::peer_alive(int peer) const { return !health_->why_unreachable(peer).has_value(); }

void Bootstrap::on_peer_death(std::function<void(int peer, std::string_view why)> callback) {
  health_->set_callback(std::move(callback));
}

Expected<void> Bootstrap::check_peer(int peer) const {
  if (peer < 0 || peer >= identity_.size) {
    return make_error(Errc::invalid_argument,
                      fmt::format("rank {} does not exist: the job has ranks 0..{}", peer, identity_.size - 1),
                      "pass a rank below the job size");
  }
  if (auto why = health_->why_unreachable(peer)) {
    return make_error(Errc::peer_unreachable, fmt::format("rank {} is gone: {}", peer, *why),
                      "the job cannot complete; check why that rank died (launcher output)");
  }
  return {};
}

Expected<void> Bootstrap::check_all_peers() const {
  if (auto gone = health_->first_unreachable()) {
    std::string who = gone->first >= 0 ? fmt::format("rank {} is gone", gone->first) : "the launcher is gone";
    return make_error(Errc::peer_unreachable, fmt::format("{}: {}", who, gone->second),
                      "the job cannot complete; check why that rank died (launcher output)");
  }
  return {};
}

}  // namespace tether
