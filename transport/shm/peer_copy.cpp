#include "transport/shm/peer_copy.hpp"

#include <unistd.h>

#include <limits>

#include <fmt/format.h>

#include "runtime/base/config.hpp"

namespace tether::transport::shm {
namespace {

std::size_t half_of_l2() noexcept {
  long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<std::size_t>(l2) / 2 : std::size_t{512} << 10;
}

}  // namespace

Expected<std::size_t> parse_streaming_copy(std::string_view text) {
  if (text == "off") return std::numeric_limits<std::size_t>::max();
  if (text == "on") return half_of_l2();
  auto bytes = config::parse_size(text);
  if (!bytes || text == "auto")  // parse_size reads "auto" as 0, which here would stream every copy
    return make_error(Errc::invalid_argument, fmt::format("TETHER_SHM_STREAMING_COPY={} is not off, on or a size", text),
                      "set it to off, on, or a size such as 512K");
  return static_cast<std::size_t>(*bytes);
}

std::size_t streaming_copy_threshold() noexcept {
  static const std::size_t threshold = [] {
    auto parsed = parse_streaming_copy(config::Config::global().text("TETHER_SHM_STREAMING_COPY"));
    return parsed ? *parsed : std::numeric_limits<std::size_t>::max();
  }();
  return threshold;
}

}  // namespace tether::transport::shm
