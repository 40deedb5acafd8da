#include "transport/shm/peer_copy.hpp"

#include <unistd.h>

#include <limits>
#include <string>

#include <fmt/format.h>

#include "runtime/base/config.hpp"

namespace tether::transport::shm {
std::size_t l2_cache_bytes() noexcept {
  long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<std::size_t>(l2) : std::size_t{1} << 20;
}

Expected<std::size_t> parse_streaming_copy(std::string_view text) {
  std::string value = config::lower(text);
  if (value == "off") return std::numeric_limits<std::size_t>::max();
  if (value == "on") return l2_cache_bytes() / 2;
  auto bytes = config::parse_size(value);
  if (!bytes || value == "auto")  // parse_size reads "auto" as 0, which here would stream every copy
    return make_error(Errc::invalid_argument, fmt::format("TETHER_SHM_STREAMING_COPY={} is not off, on or a size", text),
                      "set it to off, on, or a size such as 512K");
  return static_cast<std::size_t>(*bytes);
}

const Expected<std::size_t>& streaming_copy_setting() {
  static const Expected<std::size_t> setting =
      parse_streaming_copy(config::Config::global().text("TETHER_SHM_STREAMING_COPY"));
  return setting;
}

std::size_t streaming_copy_threshold() noexcept {
  const auto& setting = streaming_copy_setting();
  return setting ? *setting : std::numeric_limits<std::size_t>::max();  // open() refused it already
}

}  // namespace tether::transport::shm
