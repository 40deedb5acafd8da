// Opening a verbs device, registering memory, and connecting RC queue pairs.
#include <cerrno>
#include <cstring>

#include "runtime/base/log.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace tether::transport::verbs {
namespace {

constexpr int kQueueDepth = 512;
constexpr int kInlineBytes = 64;
constexpr int kGidIndex = 0;

Error verbs_error(const char* call, int error_number, const std::string& what) {
  return Error{Errc::transport, error_number,
               fmt::format("{} failed for {}: {}", call, what, std::strerror(error_number)),
               "check the device with ibv_devinfo and the locked-memory limit (ulimit -l)"};
}

Error no_device_error(int count, int error_number) {
  return Error{Errc::unsupported, error_number,
               fmt::format("no RDMA device found: ibv_get_device_list returned {} devices{}", count,
                           error_number ? fmt::format(" ({})", std::strerror(error_number)) : ""),
               "load the RDMA driver (check `ibv_devices` and `rdma link`), or use ofi:tcp"};
}

int access_flags(Access access) {
  auto bits = static_cast<std::uint32_t>(access);
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (bits & static_cast<std::uint32_t>(Access::remote_read)) flags |= IBV_ACCESS_REMOTE_READ;
  if (bits & static_cast<std::uint32_t>(Access::remote_write)) flags |= IBV_ACCESS_REMOTE_WRITE;
  return flags;
}

ibv_device* pick_device(ibv_device** devices, int count, const std::string& wanted) {
  for (int i = 0; i < count; ++i)
    if (wanted.empty() || wanted == "auto" || wanted == ibv_get_device_name(devices[i])) return devices[i];
  return nullptr;
}

}  // namespace

Expected<Registration> VerbsRegistrar::register_range(void* address, std::size_t length, Access access) {
  ibv_mr* region = ibv_reg_mr(protection_domain_, address, length, access_flags(access));
  if (region == nullptr) {
    int error_number = errno;
    return make_error(error_number == ENOMEM ? Errc::memlock_limit : Errc::registration_failed,
                      fmt::format("ibv_reg_mr({}, {} bytes) on {} failed: {}", address, length, name_,
                                  std::strerror(error_number)),
                      "raise the locked-memory limit (ulimit -l unlimited) or lower TETHER_POOL_MAX",
                      error_number);
  }
  return Registration{address, length, region->rkey, region, region};
}

void VerbsRegistrar::deregister(const Registration& registration) noexcept {
  if (registration.handle != nullptr) ibv_dereg_mr(static_cast<ibv_mr*>(registration.handle));
}

Expected<std::unique_ptr<Transport>> VerbsTransport::open(const std::string& device_name) {
  errno = 0;
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (devices == nullptr || count == 0) {
    int error_number = errno;
    if (devices) ibv_free_device_list(devices);
    return tl::unexpected(no_device_error(count, error_number));
  }
  ibv_device* device = pick_device(devices, count, device_name);
  if (device == nullptr) {
    ibv_free_device_list(devices);
    return make_error(Errc::unsupported, fmt::format("RDMA device '{}' not found among {}", device_name, count),
                      "list devices with ibv_devices and set TETHER_VERBS_DEVICE to one of them");
  }
  std::unique_ptr<VerbsTransport> transport(new VerbsTransport());
  auto opened = transport->open_device(device);
  ibv_free_device_list(devices);
  if (!opened) return tl::unexpected(opened.error());
  log::info("transport", "opened {} (port {}, lid {})", transport->name_, transport->port_number_,
            transport->port_.lid);
  return std::unique_ptr<Transport>(std::move(transport));
}

Expected<void> VerbsTransport::open_device(ibv_device* device) {
  name_ = fmt::format("verbs:{}", ibv_get_device_name(device));
  context_ = ibv_open_device(device);
  if (context_ == nullptr) return tl::unexpected(verbs_error("ibv_open_device", errno, name_));
  if (int r = ibv_query_port(context_, port_number_, &port_); r != 0)
    return tl::unexpected(verbs_error("ibv_query_port", r, name_));
  protection_domain_ = ibv_alloc_pd(context_);
  if (protection_domain_ == nullptr) return tl::unexpected(verbs_error("ibv_alloc_pd", errno, name_));
  completion_queue_ = ibv_create_cq(context_, 2 * kQueueDepth, nullptr, nullptr, 0);
  if (completion_queue_ == nullptr) return tl::unexpected(verbs_error("ibv_create_cq", errno, name_));
  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = kQueueDepth;
  srq_attr.attr.max_sge = 1;
  shared_receive_queue_ = ibv_create_srq(protection_domain_, &srq_attr);
  if (shared_receive_queue_ == nullptr) return tl::unexpected(verbs_error("ibv_create_srq", errno, name_));
  registrar_ = std::make_unique<VerbsRegistrar>(name_, protection_domain_);
  limits_ = Limits{port_.max_msg_sz, port_.max_msg_sz, 0, kQueueDepth, kQueueDepth};
  operations_ = OperationTable(2 * kQueueDepth);
  return create_spare_queue_pair();
}

Expected<void> VerbsTransport::create_spare_queue_pair() {
  ibv_qp_init_attr init{};
  init.send_cq = completion_queue_;
  init.recv_cq = completion_queue_;
  init.srq = shared_receive_queue_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = kQueueDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_inline_data = kInlineBytes;
  spare_queue_pair_ = ibv_create_qp(protection_domain_, &init);
  if (spare_queue_pair_ == nullptr) return tl::unexpected(verbs_error("ibv_create_qp", errno, name_));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = port_number_;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int r = ibv_modify_qp(spare_queue_pair_, &attr,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS); r != 0)
    return tl::unexpected(verbs_error("ibv_modify_qp(INIT)", r, name_));
  ibv_gid gid{};
  ibv_query_gid(context_, port_number_, kGidIndex, &gid);
  std::memcpy(address_.gid, gid.raw, sizeof(address_.gid));
  address_.qp_number = spare_queue_pair_->qp_num;
  address_.packet_sequence = spare_queue_pair_->qp_num & 0xffffff;
  address_.lid = port_.lid;
  address_.port = port_number_;
  address_.mtu = static_cast<std::uint8_t>(port_.active_mtu);
  return {};
}

Expected<void> VerbsTransport::connect(ibv_qp* queue_pair, const WireAddress& remote) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(remote.mtu, address_.mtu));
  attr.dest_qp_num = remote.qp_number;
  attr.rq_psn = remote.packet_sequence;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.port_num = port_number_;
  attr.ah_attr.is_global = 1;
  std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
  attr.ah_attr.grh.sgid_index = kGidIndex;
  attr.ah_attr.grh.hop_limit = 1;
  if (int r = ibv_modify_qp(queue_pair, &attr,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER); r != 0)
    return tl::unexpected(verbs_error("ibv_modify_qp(RTR)", r, name_));
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.sq_psn = address_.packet_sequence;
  attr.max_rd_atomic = 1;
  if (int r = ibv_modify_qp(queue_pair, &attr,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC); r != 0)
    return tl::unexpected(verbs_error("ibv_modify_qp(RTS)", r, name_));
  return {};
}

std::span<const std::byte> VerbsTransport::address() const noexcept {
  return std::as_bytes(std::span(&address_, 1));
}

Expected<PeerIndex> VerbsTransport::insert_peer(std::span<const std::byte> address) {
  if (address.size() != sizeof(WireAddress))
    return make_error(Errc::invalid_argument,
                      fmt::format("{} got a {}-byte peer address, expected {}", name_, address.size(),
                                  sizeof(WireAddress)),
                      "pass the bytes of address() from a verbs peer");
  WireAddress remote;
  std::memcpy(&remote, address.data(), sizeof(remote));
  if (auto connected = connect(spare_queue_pair_, remote); !connected) return tl::unexpected(connected.error());
  auto peer = static_cast<PeerIndex>(peers_.size());
  peers_.push_back(spare_queue_pair_);
  peer_of_queue_pair_[spare_queue_pair_->qp_num] = peer;
  spare_queue_pair_ = nullptr;
  if (auto spare = create_spare_queue_pair(); !spare) return tl::unexpected(spare.error());
  return peer;
}

void VerbsTransport::close_resources() noexcept {
  detach_pool();
  for (ibv_qp* queue_pair : peers_) ibv_destroy_qp(queue_pair);
  if (spare_queue_pair_) ibv_destroy_qp(spare_queue_pair_);
  if (shared_receive_queue_) ibv_destroy_srq(shared_receive_queue_);
  if (completion_queue_) ibv_destroy_cq(completion_queue_);
  if (protection_domain_) ibv_dealloc_pd(protection_domain_);
  if (context_) ibv_close_device(context_);
}

VerbsTransport::~VerbsTransport() { close_resources(); }

}  // namespace tether::transport::verbs
