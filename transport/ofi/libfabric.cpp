// Loading libfabric.so.1 and resolving its five exported entry points.
#include "transport/ofi/libfabric.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include <fmt/format.h>

namespace tether::transport::ofi {
namespace {

constexpr const char* kLibrary = "libfabric.so.1";

Libfabric g_libfabric{};

// The default version of `name`, the one a link against this libfabric's headers binds.
template <typename Function>
bool resolve(void* library, const char* name, Function& function, std::string& missing) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
  if (function == nullptr) missing += missing.empty() ? name : fmt::format(", {}", name);
  return function != nullptr;
}

Expected<void> load_once() {
  void* library = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    return make_error(Errc::unsupported, fmt::format("cannot load {}: {}", kLibrary, ::dlerror()),
                      "install libfabric1 (Debian, Ubuntu) or libfabric (RHEL), or use tether's own transports: "
                      "TETHER_SHM_TRANSPORT=own on one node, TETHER_NET_TRANSPORT=own across nodes");
  std::string missing;
  Libfabric loaded{};
  // & rather than &&: every missing name gets listed.
  bool complete = resolve(library, "fi_getinfo", loaded.getinfo, missing) &
                  resolve(library, "fi_freeinfo", loaded.freeinfo, missing) &
                  resolve(library, "fi_dupinfo", loaded.dupinfo, missing) &
                  resolve(library, "fi_fabric", loaded.fabric, missing) &
                  resolve(library, "fi_strerror", loaded.strerror, missing);
  if (!complete)
    return make_error(Errc::unsupported, fmt::format("{} lacks {}", kLibrary, missing),
                      "install a libfabric of version 1.14 or later (fi_info --version)");
  g_libfabric = loaded;
  return {};
}

}  // namespace

Expected<const Libfabric*> load_libfabric() {
  static std::once_flag once;
  static Expected<void> loaded;
  std::call_once(once, [] { loaded = load_once(); });
  if (!loaded) return tl::unexpected(loaded.error());
  return &g_libfabric;
}

const Libfabric& libfabric() noexcept { return g_libfabric; }

}  // namespace tether::transport::ofi
