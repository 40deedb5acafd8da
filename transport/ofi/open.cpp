// Opening and closing a libfabric endpoint, and the provider choice.
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "runtime/base/log.hpp"
#include "transport/ofi/ofi_transport.hpp"
#include "transport/ofi/shm_regions.hpp"

namespace tether::transport::ofi {
namespace {

// A region under this process's own pid is a leftover of a killed process whose pid this
// one reuses: libfabric's shm would fail fi_enable with EBUSY on it.
void remove_stale_shm_regions_once() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { (void)remove_shm_regions_of(::getpid()); });
}

constexpr std::uint64_t kMrModesHandled =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
constexpr std::uint32_t kApiVersion = FI_VERSION(1, 14);

fi_info* make_hints(const std::string& provider, bool tagged = false) {
  fi_info* hints = libfabric().allocinfo();
  if (hints == nullptr) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_SOURCE | (tagged ? FI_TAGGED : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = kMrModesHandled;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  if (!provider.empty()) hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  return hints;
}

// The first entry on `domain` (layered providers such as ofi_rxm ignore a domain hint).
fi_info* first_on_domain(fi_info* list, const std::string& domain) {
  for (fi_info* info = list; info != nullptr; info = info->next)
    if (domain.empty() || (info->domain_attr->name && domain == info->domain_attr->name)) return info;
  return nullptr;
}

Error getinfo_error(int result, const std::string& provider, const std::string& domain) {
  return Error{Errc::unsupported, -result,
               fmt::format("fi_getinfo found no FI_EP_RDM endpoint with FI_MSG|FI_RMA|FI_SOURCE for "
                           "provider '{}' domain '{}': {}",
                           provider, domain.empty() ? "any" : domain, libfabric().strerror(-result)),
               "check `fi_info -p '" + provider +
                   "' -t FI_EP_RDM`, or set TETHER_OFI_PROVIDER / TETHER_OFI_DOMAIN to one it lists"};
}

Error call_error(const char* call, int result, const std::string& what) {
  return Error{Errc::transport, -result,
               fmt::format("{} failed for {}: {}", call, what, libfabric().strerror(-result)),
               "run with FI_LOG_LEVEL=warn to see the provider's reason"};
}

// Ordered list of high-performance providers preferred over tcp when present.
constexpr std::string_view kPreferredProviders[] = {"verbs;ofi_rxm", "efa", "cxi"};

// Where the devices of those providers show: rdma-core's class (InfiniBand, RoCE, iWARP,
// soft-RoCE, siw, EFA, Omni-Path) and Slingshot's (cxi_user is what libcxi lists, and all a
// container may see; cxi on the host). With all empty none of them can open, and asking
// libfabric costs a network job about 0.35 s at start (its providers' constructors and
// probes: Debian's build calibrates a clock for 100 ms and reads /proc/kallsyms).
constexpr const char* kRdmaDeviceClasses[] = {"/sys/class/infiniband", "/sys/class/cxi_user", "/sys/class/cxi"};

bool rdma_device_listed() {
  for (const char* device_class : kRdmaDeviceClasses) {
    std::error_code error;
    std::filesystem::directory_iterator devices(device_class, error);
    if (!error && devices != std::filesystem::directory_iterator()) return true;
  }
  return false;
}

}  // namespace

std::string choose_provider(std::string_view requested, std::string& why) {
  if (!requested.empty() && requested != "auto") {
    why = "TETHER_OFI_PROVIDER or the caller asked for it";
    return std::string(requested);
  }
  if (!rdma_device_listed()) {
    why = "no RDMA device in /sys/class/infiniband, cxi_user or cxi; tcp;ofi_rxm works everywhere";
    return "tcp;ofi_rxm";
  }
  if (auto loaded = load_libfabric(); !loaded) {
    why = loaded.error().message();
    static std::once_flag warned;
    std::call_once(warned, [&] { log::warn("transport", "no libfabric provider can be listed: {}", why); });
    return "tcp;ofi_rxm";
  }
  fi_info* hints = make_hints("");
  fi_info* found = nullptr;
  int result = hints ? libfabric().getinfo(kApiVersion, nullptr, nullptr, 0, hints, &found) : -FI_ENOMEM;
  libfabric().freeinfo(hints);
  std::string chosen;
  for (auto preferred : kPreferredProviders) {
    for (fi_info* info = result == 0 ? found : nullptr; info && chosen.empty(); info = info->next)
      if (preferred == info->fabric_attr->prov_name) chosen = std::string(preferred);
  }
  libfabric().freeinfo(found);
  if (!chosen.empty()) {
    why = "the first of verbs;ofi_rxm, efa, cxi that fi_getinfo lists";
    return chosen;
  }
  why = "no verbs, efa or cxi provider listed; tcp;ofi_rxm works everywhere";
  return "tcp;ofi_rxm";
}

Errc errc_of(int provider_errno) noexcept {
  switch (provider_errno) {
    case FI_ECONNREFUSED: case FI_ECONNRESET: case FI_ECONNABORTED: case FI_EHOSTUNREACH:
    case FI_ENOTCONN: case EPIPE: case FI_ESHUTDOWN: case FI_EADDRNOTAVAIL:
      return Errc::peer_unreachable;
    case FI_ETIMEDOUT: return Errc::timeout;
    case FI_ETRUNC: return Errc::truncated;
    case FI_EINVAL: case FI_EKEYREJECTED: case FI_EACCES: case FI_EPERM: case FI_EFAULT:
    case FI_ENOKEY: case FI_EBADFLAGS:
      return Errc::invalid_argument;
    default: return Errc::transport;
  }
}

namespace {

// The fi_info of `provider` on `domain`, with FI_TAGGED when notifications go by send.
Expected<fi_info*> find_info(const std::string& provider, const std::string& domain, bool tagged) {
  fi_info* hints = make_hints(provider, tagged);
  if (hints == nullptr) return make_error(Errc::out_of_memory, "fi_allocinfo failed", "free memory");
  fi_info* found = nullptr;
  int result = libfabric().getinfo(kApiVersion, nullptr, nullptr, 0, hints, &found);
  libfabric().freeinfo(hints);
  fi_info* on_domain = result == 0 ? first_on_domain(found, domain) : nullptr;
  fi_info* chosen = on_domain != nullptr ? libfabric().dupinfo(on_domain) : nullptr;
  libfabric().freeinfo(found);
  if (chosen == nullptr) return tl::unexpected(getinfo_error(result == 0 ? -FI_ENODATA : result, provider, domain));
  return chosen;
}

bool carries_cq_data(const fi_info* info) { return info->domain_attr->cq_data_size >= sizeof(std::uint64_t); }

}  // namespace

Expected<std::unique_ptr<Transport>> OfiTransport::open(const std::string& provider, const std::string& domain,
                                                        Notify notify) {
  if (auto loaded = load_libfabric(); !loaded) return tl::unexpected(loaded.error());
  auto chosen = find_info(provider, domain, notify == Notify::send);
  if (!chosen) return tl::unexpected(chosen.error());
  bool by_send = notify == Notify::send || (notify == Notify::automatic && !carries_cq_data(*chosen));
  if (notify == Notify::cq_data && !carries_cq_data(*chosen)) {
    std::size_t bytes = (*chosen)->domain_attr->cq_data_size;
    libfabric().freeinfo(*chosen);
    return make_error(Errc::unsupported, fmt::format("{} carries {} bytes of remote CQ data, 8 needed", provider, bytes),
                      "set TETHER_OFI_NOTIFY=auto or send (the notification then follows the write as a message)");
  }
  if (by_send && notify != Notify::send) {  // ask again, now with FI_TAGGED
    libfabric().freeinfo(*chosen);
    chosen = find_info(provider, domain, true);
    if (!chosen) return tl::unexpected(chosen.error());
  }
  std::unique_ptr<OfiTransport> transport(new OfiTransport(*chosen));
  transport->notify_by_send_ = by_send;
  if (auto opened = transport->open_resources(); !opened) return tl::unexpected(opened.error());
  log::info("transport", "opened {} (fabric {}, mr_mode {:#x}, inject {} B, tx depth {}, notifications by {})",
            transport->name_, (*chosen)->fabric_attr->name, (*chosen)->domain_attr->mr_mode,
            transport->limits_.inject_bytes, transport->limits_.send_queue_depth, by_send ? "send" : "CQ data");
  return std::unique_ptr<Transport>(std::move(transport));
}

OfiTransport::OfiTransport(fi_info* info) : info_(info) {
  name_ = fmt::format("ofi:{}:{}", info->fabric_attr->prov_name, info->domain_attr->name);
  std::string_view provider = info->fabric_attr->prov_name;
  // "net": libfabric 1.17's native TCP RDM provider (named tcp from 1.18 on).
  software_provider_ = provider.starts_with("tcp") || provider.starts_with("net") || provider.starts_with("shm") ||
                       provider.starts_with("udp") || provider.starts_with("sockets");
  limits_.max_message_bytes = info->ep_attr->max_msg_size;
  limits_.max_rma_bytes = info->ep_attr->max_msg_size;
  limits_.inject_bytes = info->tx_attr->inject_size;
  limits_.send_queue_depth = info->tx_attr->size;
  limits_.receive_queue_depth = info->rx_attr->size;
  needs_local_descriptor_ = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  virtual_addressing_ = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  operations_ = OperationTable(limits_.send_queue_depth + limits_.receive_queue_depth);
}

Expected<void> OfiTransport::open_resources() {
  if (int r = libfabric().fabric(info_->fabric_attr, &fabric_, nullptr); r != 0)
    return tl::unexpected(call_error("fi_fabric", r, name_));
  if (int r = fi_domain(fabric_, info_, &domain_, nullptr); r != 0)
    return tl::unexpected(call_error("fi_domain", r, name_));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if (int r = fi_av_open(domain_, &av_attr, &av_, nullptr); r != 0)
    return tl::unexpected(call_error("fi_av_open", r, name_));
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.size = limits_.send_queue_depth + limits_.receive_queue_depth;
  cq_attr.wait_obj = FI_WAIT_NONE;
  if (int r = fi_cq_open(domain_, &cq_attr, &cq_, nullptr); r != 0)
    return tl::unexpected(call_error("fi_cq_open", r, name_));
  if (auto opened = open_endpoint(); !opened) return opened;
  registrar_ = std::make_unique<OfiRegistrar>(name_, domain_, endpoint_, info_->domain_attr->mr_mode);
  if (auto named = read_address(); !named) return named;
  return notify_by_send_ ? post_notification_receives() : Expected<void>{};
}

Expected<void> OfiTransport::open_endpoint() {
  if (int r = fi_endpoint(domain_, info_, &endpoint_, nullptr); r != 0)
    return tl::unexpected(call_error("fi_endpoint", r, name_));
  if (int r = fi_ep_bind(endpoint_, &av_->fid, 0); r != 0)
    return tl::unexpected(call_error("fi_ep_bind(av)", r, name_));
  if (int r = fi_ep_bind(endpoint_, &cq_->fid, FI_TRANSMIT | FI_RECV); r != 0)
    return tl::unexpected(call_error("fi_ep_bind(cq)", r, name_));
  remove_stale_shm_regions_once();
  if (int r = fi_enable(endpoint_); r != 0) return tl::unexpected(call_error("fi_enable", r, name_));
  return {};
}

Expected<void> OfiTransport::read_address() {
  std::size_t length = 0;
  fi_getname(&endpoint_->fid, nullptr, &length);
  address_.resize(length);
  if (int r = fi_getname(&endpoint_->fid, address_.data(), &length); r != 0)
    return tl::unexpected(call_error("fi_getname", r, name_));
  address_.resize(length);
  address_bytes_ = length;
  return {};
}

// String addresses (FI_ADDR_STR, e.g. shm's, which carry a pid) differ in length between
// peers: they must only be NUL-terminated and short. Binary ones must match our length.
Expected<PeerIndex> OfiTransport::insert_peer(std::span<const std::byte> address) {
  constexpr std::size_t kMaxStringAddressBytes = 256;
  bool string_address = info_->addr_format == FI_ADDR_STR;
  bool acceptable = string_address ? !address.empty() && address.size() <= kMaxStringAddressBytes &&
                                         address.back() == std::byte{0}
                                   : address.size() == address_bytes_;
  if (!acceptable)
    return make_error(Errc::invalid_argument,
                      fmt::format("{} got a {}-byte peer address; its own are {} bytes{}", name_,
                                  address.size(), address_bytes_,
                                  string_address ? " (a string address must end in NUL)" : ""),
                      "pass the bytes of address() from a peer opened with the same provider");
  fi_addr_t inserted = FI_ADDR_UNSPEC;
  int count = fi_av_insert(av_, address.data(), 1, &inserted, 0, nullptr);
  if (count != 1 || inserted != peer_count_)
    return make_error(Errc::peer_unreachable,
                      fmt::format("fi_av_insert on {} failed: {}", name_,
                                  count < 0 ? libfabric().strerror(-count) : "address not accepted"),
                      "check that the peer's address bytes came from the same provider and network");
  return peer_count_++;
}

void OfiTransport::close_resources() noexcept {
  detach_pool();
  if (endpoint_) fi_close(&endpoint_->fid);
  release_notification_buffers();
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  libfabric().freeinfo(info_);
}

OfiTransport::~OfiTransport() { close_resources(); }

}  // namespace tether::transport::ofi
