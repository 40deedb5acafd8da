// PmixServer: PMIx_server_init, the server module, client registration and notification.
#include "launch/pmix_server.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <pmix_server.h>

#include "launch/pmix_job_info.hpp"
#include "runtime/base/log.hpp"
#include "runtime/bootstrap/pmix_values.hpp"

namespace tether::launch {
namespace {

constexpr auto kPmixWait = std::chrono::seconds(30);

void on_op_done(pmix_status_t status, void* cbdata) { pmix::PendingCall::from_cbdata(cbdata)->complete(status); }

// Runs `start(cbfunc, cbdata)`, a PMIx call that completes through a pmix_op_cbfunc_t.
template <class Start>
Expected<void> call_and_wait(std::string_view what, Start start) {
  auto call = std::make_shared<pmix::PendingCall>();
  void* cbdata = pmix::PendingCall::to_cbdata(call);
  pmix_status_t rc = start(on_op_done, cbdata);
  if (rc == PMIX_OPERATION_SUCCEEDED) {
    pmix::PendingCall::from_cbdata(cbdata);
    return {};
  }
  if (rc == PMIX_SUCCESS) {
    auto waited = call->wait(kPmixWait, what, [] { return std::optional<Error>(); });
    if (!waited) return tl::unexpected(waited.error());
    rc = *waited;
  } else {
    pmix::PendingCall::from_cbdata(cbdata);
  }
  if (rc != PMIX_SUCCESS) {
    return make_error(Errc::unsupported, fmt::format("{} failed: {}", what, pmix::status_text(rc)),
                      "check the PMIx installation (libpmix2) and TETHER_RUN_TMPDIR", rc);
  }
  return {};
}

PmixServer* server_of(void* server_object) { return static_cast<PmixServer*>(server_object); }

// Both answered before the client's PMIx_Init or PMIx_Finalize returns: a rank that exits
// after PMIx_Finalize is seen as finalized.
pmix_status_t on_client_connected(const pmix_proc_t* proc, void* server_object, pmix_op_cbfunc_t, void*) {
  if (server_object == nullptr) return PMIX_OPERATION_SUCCEEDED;
  server_of(server_object)->record_stage(static_cast<int>(proc->rank), ClientStage::connected);
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_client_finalized(const pmix_proc_t* proc, void* server_object, pmix_op_cbfunc_t, void*) {
  if (server_object == nullptr) return PMIX_OPERATION_SUCCEEDED;
  server_of(server_object)->record_stage(static_cast<int>(proc->rank), ClientStage::finalized);
  return PMIX_OPERATION_SUCCEEDED;
}

// Acknowledged through cbfunc: PMIx 4.2 mishandles an abort answered synchronously
// (PMIX_OPERATION_SUCCEEDED), leaving PMIx_server_finalize deadlocked or crashing later.
pmix_status_t on_abort(const pmix_proc_t* proc, void* server_object, int status, const char message[],
                       pmix_proc_t[], size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  if (server_object == nullptr) return PMIX_ERR_NOT_SUPPORTED;
  server_of(server_object)->record_abort(
      AbortRequest{static_cast<int>(proc->rank), status, message != nullptr ? message : ""});
  if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, cbdata);
  return PMIX_SUCCESS;
}

void release_blob(void* blob) { std::free(blob); }

// Every participant is a client of this one server (also the --netns "hosts"), so the
// library has already gathered all of their contributions: hand the blob straight back. The blob is ours; PMIx frees it through
// release_blob once it has copied it out.
pmix_status_t on_fence(const pmix_proc_t[], size_t, const pmix_info_t[], size_t, char* data, size_t ndata,
                       pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, release_blob, data);
  return PMIX_SUCCESS;
}

// The library answers requests for its own clients itself; this is only asked about
// ranks served elsewhere, and every rank of a tether-run job is a client of this server.
pmix_status_t on_direct_modex(const pmix_proc_t*, const pmix_info_t[], size_t, pmix_modex_cbfunc_t, void*) {
  return PMIX_ERR_NOT_FOUND;
}

pmix_status_t on_register_events(pmix_status_t*, size_t, const pmix_info_t[], size_t, pmix_op_cbfunc_t, void*) {
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_server_module_t make_module() {
  pmix_server_module_t module;
  std::memset(&module, 0, sizeof(module));
  module.client_connected = on_client_connected;
  module.client_finalized = on_client_finalized;
  module.abort = on_abort;
  module.fence_nb = on_fence;
  module.direct_modex = on_direct_modex;
  module.register_events = on_register_events;
  return module;
}

// Loopback by default. Ranks in other network namespaces have a loopback of their own, so
// then the listener moves to the one interface they all reach (IPv4 only: PMIx would
// otherwise take whichever address of it comes first, possibly link-local IPv6).
void add_listener(InfoList& info, const std::optional<SharedInterface>& listen_on) {
  info.add_flag(PMIX_SERVER_REMOTE_CONNECTIONS, listen_on.has_value());
  if (!listen_on) return;
  info.add_text(PMIX_TCP_IF_INCLUDE, listen_on->name);
  info.add_flag(PMIX_TCP_DISABLE_IPV6, true);
  log::info("launch", "PMIx server listens on {} ({}) for ranks in other network namespaces", listen_on->name,
            listen_on->address);
}

Expected<void> init_library(const std::string& tmpdir, const std::string& job_id,
                            const std::optional<SharedInterface>& listen_on) {
  static pmix_server_module_t module = make_module();
  InfoList info;
  info.add_text(PMIX_SERVER_TMPDIR, tmpdir);
  info.add_text(PMIX_SYSTEM_TMPDIR, tmpdir);
  info.add_text(PMIX_SERVER_NSPACE, job_id + ".server");
  info.add_rank(PMIX_SERVER_RANK, 0);
  add_listener(info, listen_on);
  info.add_flag(PMIX_SERVER_TOOL_SUPPORT, false);
  auto array = info.to_array();
  pmix_status_t rc = PMIx_server_init(&module, array.info(), array.count());
  if (rc != PMIX_SUCCESS) {
    return make_error(Errc::unsupported, fmt::format("PMIx_server_init failed: {}", pmix::status_text(rc)),
                      "check the PMIx installation (libpmix2) and that TETHER_RUN_TMPDIR is writable", rc);
  }
  return {};
}

std::vector<std::string> take_env(char** env) {
  std::vector<std::string> entries;
  for (char** entry = env; entry != nullptr && *entry != nullptr; ++entry) {
    entries.emplace_back(*entry);
    std::free(*entry);
  }
  std::free(env);
  return entries;
}

}  // namespace

Expected<std::unique_ptr<PmixServer>> PmixServer::start(const std::string& tmpdir, Placement placement,
                                                        const std::optional<SharedInterface>& listen_on) {
  std::string job_id = fmt::format("tether-run.{}", getpid());
  if (auto initialised = init_library(tmpdir, job_id, listen_on); !initialised)
    return tl::unexpected(initialised.error());
  int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::unique_ptr<PmixServer> server(new PmixServer(job_id, std::move(placement), wake_fd));
  if (wake_fd < 0) {
    return make_error(Errc::out_of_memory, fmt::format("eventfd failed: {}", std::strerror(errno)),
                      "raise the open-file limit (ulimit -n)", errno);
  }
  if (auto registered = server->register_job(); !registered) return tl::unexpected(registered.error());
  return server;
}

PmixServer::PmixServer(std::string job_id, Placement placement, int wake_fd)
    : job_id_(std::move(job_id)), placement_(std::move(placement)), ranks_(placement_.ranks()), wake_fd_(wake_fd),
      stages_(new std::atomic<ClientStage>[static_cast<std::size_t>(ranks_)]) {
  for (int rank = 0; rank < ranks_; ++rank) stages_[static_cast<std::size_t>(rank)] = ClientStage::not_connected;
}

// PMIx 4.2.2 can crash or deadlock in PMIx_server_finalize after a client vanished
// without PMIx_Finalize (killed, aborted) while a fence was pending. So the library is
// shut down only when every rank finalized; otherwise it is left to process exit, and
// main() leaves through _exit once the private directory is gone.
PmixServer::~PmixServer() {
  if (every_rank_finalized()) {
    (void)call_and_wait("PMIx_server_deregister_nspace", [this](pmix_op_cbfunc_t cbfunc, void* cbdata) {
      PMIx_server_deregister_nspace(job_id_.c_str(), cbfunc, cbdata);
      return PMIX_SUCCESS;
    });
    pmix_status_t rc = PMIx_server_finalize();
    if (rc != PMIX_SUCCESS) log::warn("launch", "PMIx_server_finalize failed: {}", pmix::status_text(rc));
  } else {
    log::info("launch", "not finalizing the PMIx server: some ranks ended without PMIx_Finalize");
    // Its thread runs on and may still report a client's finalize: the flags it writes
    // stay allocated until the process exits.
    static_cast<void>(stages_.release());
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool PmixServer::every_rank_finalized() const {
  for (int rank = 0; rank < ranks_; ++rank)
    if (stage(rank) != ClientStage::finalized) return false;
  return true;
}

Expected<void> PmixServer::register_job() {
  auto info = job_info(job_id_, placement_);
  if (!info) return tl::unexpected(info.error());
  auto array = (*info)->to_array();
  auto registered = call_and_wait("PMIx_server_register_nspace", [&](pmix_op_cbfunc_t cbfunc, void* cbdata) {
    return PMIx_server_register_nspace(job_id_.c_str(), ranks_, array.info(), array.count(), cbfunc, cbdata);
  });
  job_registered_ = registered.has_value();
  return registered;
}

Expected<std::vector<std::string>> PmixServer::prepare_rank(int rank) {
  pmix_proc_t proc = pmix::make_proc(job_id_, static_cast<pmix_rank_t>(rank));
  auto registered = call_and_wait(fmt::format("PMIx_server_register_client(rank {})", rank),
                                  [&](pmix_op_cbfunc_t cbfunc, void* cbdata) {
                                    return PMIx_server_register_client(&proc, getuid(), getgid(), this, cbfunc,
                                                                       cbdata);
                                  });
  if (!registered) return tl::unexpected(registered.error());
  char** env = static_cast<char**>(std::calloc(1, sizeof(char*)));
  pmix_status_t rc = PMIx_server_setup_fork(&proc, &env);
  auto entries = take_env(env);
  // PMIx clients take their node's name from PMIX_HOSTNAME: it selects the node-level
  // values (local peers) that describe the rank's own host.
  if (placement_.host_count() > 1)
    entries.push_back(fmt::format("PMIX_HOSTNAME={}", placement_.host_name(placement_.host_of(rank))));
  if (rc != PMIX_SUCCESS) {
    return make_error(Errc::unsupported, fmt::format("PMIx_server_setup_fork(rank {}) failed: {}", rank,
                                                     pmix::status_text(rc)),
                      "check the PMIx installation (libpmix2)", rc);
  }
  return entries;
}

void PmixServer::notify_death(int rank, int exit_code, const std::string& why) {
  pmix_proc_t dead = pmix::make_proc(job_id_, static_cast<pmix_rank_t>(rank));
  InfoList info;
  info.add_proc(PMIX_EVENT_AFFECTED_PROC, dead);
  info.add_int(PMIX_EXIT_CODE, exit_code);
  info.add_text(PMIX_EVENT_TEXT_MESSAGE, why);
  info.add_flag(PMIX_EVENT_NON_DEFAULT, false);
  auto array = info.to_array();
  auto notified = call_and_wait(fmt::format("PMIx_Notify_event(rank {} died)", rank),
                                [&](pmix_op_cbfunc_t cbfunc, void* cbdata) {
                                  return PMIx_Notify_event(PMIX_ERR_PROC_ABORTED, &dead, PMIX_RANGE_NAMESPACE,
                                                           array.info(), array.count(), cbfunc, cbdata);
                                });
  if (!notified) log::warn("launch", "{}", notified.error().message());
}

std::vector<AbortRequest> PmixServer::take_aborts() {
  std::uint64_t count = 0;
  while (read(wake_fd_, &count, sizeof(count)) > 0) {
  }
  std::vector<AbortRequest> taken;
  std::lock_guard lock(aborts_mutex_);
  taken.swap(aborts_);
  return taken;
}

ClientStage PmixServer::stage(int rank) const { return stages_[static_cast<std::size_t>(rank)].load(); }

void PmixServer::record_stage(int rank, ClientStage stage) {
  if (rank >= 0 && rank < ranks_) stages_[static_cast<std::size_t>(rank)] = stage;
}

void PmixServer::record_abort(AbortRequest request) {
  {
    std::lock_guard lock(aborts_mutex_);
    aborts_.push_back(std::move(request));
  }
  std::uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) log::warn("launch", "cannot wake the launcher loop: {}", std::strerror(errno));
}

}  // namespace tether::launch
