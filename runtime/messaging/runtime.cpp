// tether::Runtime: bootstrap, transport choice, and the public face of the engine.
#include "tether/runtime.hpp"

#include <fmt/format.h>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "runtime/messaging/engine.hpp"
#include "transport/transport.hpp"

namespace tether {
namespace {

// On-node jobs use a shared-memory transport (tether's own unless
// TETHER_SHM_TRANSPORT=ofi); jobs spanning nodes use hybrid (shared memory to this
// node's peers, the network to the others), on every rank alike: addresses of different
// transports do not mix. TETHER_SHM=off gives the network transport for all
// (TETHER_NET_TRANSPORT); a libfabric provider named for a one-node job gives "ofi".
std::string transport_spec(const Bootstrap& bootstrap) {
  const auto& config = config::Config::global();
  const auto& identity = bootstrap.identity();
  bool all_local = identity.local_peers.size() == static_cast<std::size_t>(identity.size);
  bool node_named = config.is_set("TETHER_NODE_NAME");
  if (!config.flag("TETHER_SHM")) return transport::network_spec();
  if (node_named || !all_local) return "hybrid";
  if (config.is_set("TETHER_OFI_PROVIDER")) return "ofi";
  return config.choice("TETHER_SHM_TRANSPORT") == "ofi" ? "ofi:shm" : "shm-own";
}

// The node as PMIx places this rank (ranks PMIx calls local share memory), unless
// TETHER_NODE_NAME names it.
std::string node_name(const Bootstrap& bootstrap) {
  const auto& config = config::Config::global();
  if (config.is_set("TETHER_NODE_NAME")) return std::string(config.text("TETHER_NODE_NAME"));
  const auto& identity = bootstrap.identity();
  return fmt::format("{}/node {}/{}", identity.job_id, identity.node_id, identity.hostname);
}

}  // namespace

Runtime::Runtime(std::unique_ptr<messaging::Engine> engine) : engine_(std::move(engine)) {}
Runtime::~Runtime() = default;

Expected<std::unique_ptr<Runtime>> Runtime::start() {
  auto bootstrap = Bootstrap::connect();
  if (!bootstrap) return tl::unexpected(bootstrap.error());
  std::string spec = transport_spec(**bootstrap);
  transport::OpenOptions options;
  options.node = node_name(**bootstrap);
  auto transport = transport::open_transport(spec, options);
  if (!transport) return tl::unexpected(transport.error());
  auto engine = std::make_unique<messaging::Engine>(std::move(*bootstrap), std::move(*transport),
                                                    messaging::EngineOptions::from_config());
  auto started = engine->start();
  if (!started) return tl::unexpected(started.error());
  return std::unique_ptr<Runtime>(new Runtime(std::move(engine)));
}

int Runtime::rank() const noexcept { return engine_->rank(); }
int Runtime::size() const noexcept { return engine_->size(); }

Status Runtime::isend(const void* buffer, std::size_t bytes, int peer, int tag, Request& request) noexcept {
  return engine_->start_send(buffer, bytes, peer, tag, request);
}

Status Runtime::irecv(void* buffer, std::size_t bytes, int source, int tag, Request& request) noexcept {
  return engine_->start_receive(buffer, bytes, source, tag, request);
}

Status Runtime::test(Request& request, MessageInfo* info) noexcept { return engine_->test(request, info); }
Status Runtime::wait(Request& request, MessageInfo* info) noexcept { return engine_->wait(request, info); }

Status Runtime::wait_all(std::span<Request> requests, std::span<MessageInfo> infos) noexcept {
  Status overall = Status::done;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].valid()) continue;
    MessageInfo* info = i < infos.size() ? &infos[i] : nullptr;
    if (engine_->wait(requests[i], info) != Status::done) overall = Status::error;
  }
  return overall;
}

void Runtime::progress() noexcept { engine_->progress(); }
const Error& Runtime::last_error() const noexcept { return engine_->last_error(); }
Bootstrap& Runtime::bootstrap() noexcept { return engine_->bootstrap(); }

Expected<void> Runtime::barrier() {
  if (engine_->barrier() == Status::done) return {};
  return tl::unexpected(engine_->last_error());
}

}  // namespace tether
