// fi_mr_reg as a Registrar: keys from the provider (FI_MR_PROV_KEY) or from a counter,
// regions bound to the endpoint when FI_MR_ENDPOINT asks for it.
#include <rdma/fi_errno.h>

#include "transport/ofi/ofi_transport.hpp"

namespace tether::transport::ofi {
namespace {

std::uint64_t access_flags(Access access) {
  auto bits = static_cast<std::uint32_t>(access);
  std::uint64_t flags = 0;
  if (bits & static_cast<std::uint32_t>(Access::local_read)) flags |= FI_SEND | FI_WRITE;
  if (bits & static_cast<std::uint32_t>(Access::local_write)) flags |= FI_RECV | FI_READ;
  if (bits & static_cast<std::uint32_t>(Access::remote_read)) flags |= FI_REMOTE_READ;
  if (bits & static_cast<std::uint32_t>(Access::remote_write)) flags |= FI_REMOTE_WRITE;
  return flags;
}

Error registration_error(const std::string& name, const char* call, int result, void* address,
                         std::size_t length) {
  bool memlock = result == -FI_ENOMEM || result == -FI_EAGAIN;
  return Error{memlock ? Errc::memlock_limit : Errc::registration_failed, -result,
               fmt::format("{}({}, {} bytes) on {} failed: {}", call, address, length, name,
                           libfabric().strerror(-result)),
               memlock ? "raise the locked-memory limit (ulimit -l unlimited) or lower TETHER_POOL_MAX"
                       : "run with FI_LOG_LEVEL=warn for the provider's reason"};
}

}  // namespace

Expected<Registration> OfiRegistrar::register_range(void* address, std::size_t length, Access access) {
  std::uint64_t requested_key = (mr_mode_ & FI_MR_PROV_KEY) ? 0 : next_key_.fetch_add(1);
  fid_mr* region = nullptr;
  std::lock_guard lock(mutex_);
  int result = fi_mr_reg(domain_, address, length, access_flags(access), 0, requested_key, 0,
                         &region, nullptr);
  if (result != 0) return tl::unexpected(registration_error(name_, "fi_mr_reg", result, address, length));
  if (mr_mode_ & FI_MR_ENDPOINT) {
    if (auto bound = bind_to_endpoint(region, address, length); !bound) {
      fi_close(&region->fid);
      return tl::unexpected(bound.error());
    }
  }
  return Registration{address, length, fi_mr_key(region), fi_mr_desc(region), region};
}

Expected<void> OfiRegistrar::bind_to_endpoint(fid_mr* region, void* address, std::size_t length) {
  if (int r = fi_mr_bind(region, &endpoint_->fid, 0); r != 0)
    return tl::unexpected(registration_error(name_, "fi_mr_bind", r, address, length));
  if (int r = fi_mr_enable(region); r != 0)
    return tl::unexpected(registration_error(name_, "fi_mr_enable", r, address, length));
  return {};
}

void OfiRegistrar::deregister(const Registration& registration) noexcept {
  if (registration.handle == nullptr) return;
  std::lock_guard lock(mutex_);
  fi_close(&static_cast<fid_mr*>(registration.handle)->fid);
}

}  // namespace tether::transport::ofi
