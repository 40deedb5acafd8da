// libfabric's entry points, from a libfabric.so.1 loaded on first use (dlopen), not linked.
// Debian's libfabric1 needs libinfinipath, whose constructor calibrates a clock for 100 ms
// or more, pinned to CPU 0, in every process that loads it: linked, it cost every tether
// process (ranks, tether-run, each test) about 0.2 s at start. Now only processes that use
// libfabric pay it: an ofi transport, and TETHER_NET_TRANSPORT=auto's look for an RDMA
// provider (network jobs and tether-info, only where /sys lists an RDMA device:
// ofi/open.cpp). Everything else in libfabric's API is an inline call through the objects
// these return.
#pragma once

#include <rdma/fabric.h>

#include "tether/error.hpp"

namespace tether::transport::ofi {

struct Libfabric {
  decltype(&::fi_getinfo) getinfo;
  decltype(&::fi_freeinfo) freeinfo;
  decltype(&::fi_dupinfo) dupinfo;
  decltype(&::fi_fabric) fabric;
  decltype(&::fi_strerror) strerror;

  [[nodiscard]] fi_info* allocinfo() const { return dupinfo(nullptr); }
};

// Loads libfabric.so.1 once per process (thread-safe; never unloaded) and binds the symbol
// versions these headers were built for (cmake/TetherLibfabricVersions.cmake). The error
// names the library, the loader's reason and the fix.
[[nodiscard]] Expected<void> load_libfabric();

// The loaded entry points. Precondition: load_libfabric() succeeded (every OfiTransport and
// every provider listing is made after it did).
const Libfabric& libfabric() noexcept;

}  // namespace tether::transport::ofi
