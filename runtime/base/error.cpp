#include "tether/error.hpp"

#include <fmt/format.h>

namespace tether {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid argument";
    case Errc::out_of_memory: return "out of memory";
    case Errc::limit_exceeded: return "limit exceeded";
    case Errc::memlock_limit: return "memlock limit";
    case Errc::registration_failed: return "registration failed";
    case Errc::not_from_pool: return "not from pool";
    case Errc::double_free: return "double free";
    case Errc::unsupported: return "unsupported";
    case Errc::transport: return "transport error";
    case Errc::peer_unreachable: return "peer unreachable";
    case Errc::timeout: return "timeout";
    case Errc::truncated: return "truncated";
    case Errc::peer_closed: return "peer closed";
    case Errc::config: return "configuration error";
  }
  return "unknown error";
}

std::string Error::message() const {
  if (remedy.empty()) return fmt::format("{}: {}", errc_name(code), cause);
  return fmt::format("{}: {} ({})", errc_name(code), cause, remedy);
}

}  // namespace tether
