// open_transport: turns "ofi:shm", "ofi:tcp", "ofi", "verbs" into a backend, filling
// what the caller left empty from TETHER_OFI_PROVIDER, TETHER_OFI_DOMAIN, TETHER_VERBS_DEVICE.
#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "transport/hybrid/hybrid_transport.hpp"
#include "transport/ofi/ofi_transport.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace tether::transport {
namespace {

std::string configured(std::string_view option) {
  auto value = config::Config::global().text(option);
  return value == "auto" ? std::string() : std::string(value);
}

std::string expand_provider_alias(std::string_view provider) {
  if (provider == "tcp") return "tcp;ofi_rxm";
  if (provider == "verbs") return "verbs;ofi_rxm";
  return std::string(provider);
}

Expected<std::unique_ptr<Transport>> open_ofi(std::string_view provider_part, const OpenOptions& options) {
  std::string requested = options.provider.empty() ? std::string(provider_part) : options.provider;
  if (requested.empty()) requested = configured("TETHER_OFI_PROVIDER");
  std::string why;
  std::string provider = ofi::choose_provider(expand_provider_alias(requested), why);
  std::string domain = options.domain.empty() ? configured("TETHER_OFI_DOMAIN") : options.domain;
  log::info("transport", "libfabric provider {} ({}), domain {}", provider, why,
            domain.empty() ? "any" : domain);
  std::string notify = options.notify.empty() ? std::string(config::Config::global().choice("TETHER_OFI_NOTIFY"))
                                              : options.notify;
  using Notify = ofi::OfiTransport::Notify;
  return ofi::OfiTransport::open(provider, domain,
                                 notify == "send" ? Notify::send : notify == "cq-data" ? Notify::cq_data : Notify::automatic);
}

Expected<std::unique_ptr<Transport>> open_hybrid(const OpenOptions& options) {
  std::string_view local_spec = config::Config::global().choice("TETHER_SHM_TRANSPORT") == "ofi" ? "ofi:shm" : "shm-own";
  auto local = open_transport(local_spec);
  if (!local) return local;
  auto network = open_transport(network_spec(), options);
  if (!network) return network;
  std::string node = options.node.empty() ? hybrid::node_identity() : options.node;
  return hybrid::HybridTransport::open(std::move(*local), std::move(*network), std::move(node));
}

}  // namespace

Expected<std::unique_ptr<Transport>> open_transport(std::string_view spec, const OpenOptions& options) {
  auto colon = spec.find(':');
  std::string_view backend = spec.substr(0, colon);
  std::string_view rest = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  if (backend == "ofi") return open_ofi(rest, options);
  if (backend == "shm-own") return shm::ShmTransport::open();
  if (backend == "tcp-own") return tcp::TcpTransport::open(!options.domain.empty() ? options.domain : std::string(rest));
  if (backend == "hybrid") return open_hybrid(options);
  if (backend == "verbs") {
    std::string device = !options.domain.empty() ? options.domain
                         : !rest.empty()         ? std::string(rest)
                                                 : configured("TETHER_VERBS_DEVICE");
    return verbs::VerbsTransport::open(device);
  }
  return make_error(Errc::invalid_argument, fmt::format("unknown transport '{}'", spec),
                    "use shm-own, tcp-own, hybrid, ofi, ofi:shm, ofi:tcp, ofi:<libfabric provider> or verbs");
}

std::string network_spec() {
  std::string_view wanted = config::Config::global().choice("TETHER_NET_TRANSPORT");
  if (wanted != "auto") return wanted == "own" ? "tcp-own" : "ofi";
  if (!configured("TETHER_OFI_PROVIDER").empty()) return "ofi";
  std::string why;
  return ofi::choose_provider("", why) == "tcp;ofi_rxm" ? "tcp-own" : "ofi";
}

std::string describe_ofi_choice() {
  std::string why;
  std::string provider =
      ofi::choose_provider(expand_provider_alias(configured("TETHER_OFI_PROVIDER")), why);
  std::string domain = configured("TETHER_OFI_DOMAIN");
  return fmt::format("{} ({}), domain {}", provider, why, domain.empty() ? "any" : domain);
}

}  // namespace tether::transport
