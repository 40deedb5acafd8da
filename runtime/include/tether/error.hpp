// Error model: status values on hot paths, tl::expected<T, Error> on set-up paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace tether {

// What went wrong, coarse enough for a caller to branch on.
enum class Errc : std::uint16_t {
  ok = 0,
  invalid_argument,   // the caller passed something that can never work
  out_of_memory,      // the pool or the OS has no memory left for this request
  limit_exceeded,     // a configured limit (pool max, cache size) was reached
  memlock_limit,      // pinning failed because of RLIMIT_MEMLOCK
  registration_failed,// a registrar refused a range for another reason
  not_from_pool,      // a pointer the pool never handed out
  double_free,        // a pool buffer released twice
  unsupported,        // the machine or provider lacks a needed feature
  transport,          // a transport call failed
  peer_unreachable,   // a peer cannot be reached or died
  timeout,            // an operation did not finish in time
  truncated,          // a message was longer than the buffer posted for it
  peer_closed,        // the peer closed its side of a persistent channel
  config,             // a TETHER_* variable has a value that cannot be used
  // new codes go above this line: config stays last (messaging::is_error_code)
};

std::string_view errc_name(Errc code) noexcept;

// A set-up path error: what happened, why, and what the user can do about it.
struct Error {
  Errc code = Errc::ok;
  int sys_errno = 0;     // errno or provider code behind the failure, 0 if none
  std::string cause;     // the exact cause, e.g. "mlock(0x7f.., 4194304) failed: ENOMEM"
  std::string remedy;    // the fix, e.g. "raise ulimit -l or set TETHER_POOL_MAX=..."

  // One line: "<code>: <cause> (<remedy>)".
  [[nodiscard]] std::string message() const;
};

template <class T>
using Expected = tl::expected<T, Error>;

[[nodiscard]] inline tl::unexpected<Error> make_error(Errc code, std::string cause,
                                                     std::string remedy, int sys_errno = 0) {
  return tl::unexpected<Error>(Error{code, sys_errno, std::move(cause), std::move(remedy)});
}

// Hot-path outcome: done now, posted (completes later), retry (back-pressure), or error.
enum class [[nodiscard]] Status : std::uint8_t { done, posted, retry, error };

}  // namespace tether
