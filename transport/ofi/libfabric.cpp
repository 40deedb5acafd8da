// Loading libfabric.so.1 and binding its five exported entry points.
#include "transport/ofi/libfabric.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include <fmt/format.h>

namespace tether::transport::ofi {
namespace {

constexpr const char* kLibrary = "libfabric.so.1";

Libfabric g_libfabric{};  // written once, inside load_libfabric's call_once

// The version a link against these headers binds (TETHER_<NAME>_VERSION, from CMake).
template <typename Function>
void bind(void* library, const char* name, const char* version, Function& function, std::string& missing) {
  function = reinterpret_cast<Function>(::dlvsym(library, name, version));
  if (function == nullptr) missing += fmt::format("{}{}@{}", missing.empty() ? "" : ", ", name, version);
}

Expected<void> load_once() {
  void* library = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    return make_error(Errc::unsupported, fmt::format("dlopen failed: {}", ::dlerror()),
                      "install libfabric1 (Debian, Ubuntu) or libfabric (RHEL), or use tether's own transports: "
                      "TETHER_SHM_TRANSPORT=own on one node, TETHER_NET_TRANSPORT=own across nodes");
  Libfabric loaded{};
  std::string missing;
  bind(library, "fi_getinfo", TETHER_FI_GETINFO_VERSION, loaded.getinfo, missing);
  bind(library, "fi_freeinfo", TETHER_FI_FREEINFO_VERSION, loaded.freeinfo, missing);
  bind(library, "fi_dupinfo", TETHER_FI_DUPINFO_VERSION, loaded.dupinfo, missing);
  bind(library, "fi_fabric", TETHER_FI_FABRIC_VERSION, loaded.fabric, missing);
  bind(library, "fi_strerror", TETHER_FI_STRERROR_VERSION, loaded.strerror, missing);
  if (!missing.empty())
    return make_error(Errc::unsupported, fmt::format("the {} found lacks {}", kLibrary, missing),
                      "it is older than the libfabric tether was built with, or not libfabric: check "
                      "`ldconfig -p | grep libfabric` and LD_LIBRARY_PATH");
  g_libfabric = loaded;
  return {};
}

}  // namespace

Expected<void> load_libfabric() {
  static std::once_flag once;
  static Expected<void> loaded;
  std::call_once(once, [] { loaded = load_once(); });
  return loaded;
}

const Libfabric& libfabric() noexcept { return g_libfabric; }

}  // namespace tether::transport::ofi
