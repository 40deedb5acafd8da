#include "transport/shm/peer_copy.hpp"

#include <unistd.h>

#include <cctype>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "runtime/base/config.hpp"

namespace tether::transport::shm {
namespace {

std::string lowered(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::size_t l2_cache_bytes() noexcept {
  long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<std::size_t>(l2) : std::size_t{1} << 20;
}

Expected<std::size_t> parse_streaming_copy(std::string_view text) {
  std::string value = lowered(text);
  if (value == "off") return std::numeric_limits<std::size_t>::max();
  if (value == "on") return l2_cache_bytes() / 2;
  auto bytes = config::parse_size(value);
  if (!bytes || value == "auto")  // parse_size reads "auto" as 0, which here would stream every copy
    return make_error(Errc::invalid_argument, fmt::format("TETHER_SHM_STREAMING_COPY={} is not off, on or a size", text),
                      "set it to off, on, or a size such as 512K");
  return static_cast<std::size_t>(*bytes);
}

std::size_t streaming_copy_threshold() noexcept {
  static const std::size_t threshold = [] {
    auto parsed = parse_streaming_copy(config::Config::global().text("TETHER_SHM_STREAMING_COPY"));
    return parsed ? *parsed : std::numeric_limits<std::size_t>::max();  // open() refused it already
  }();
  return threshold;
}

}  // namespace tether::transport::shm
