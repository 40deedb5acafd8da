// Failure injection, for tests only: libfabric's re-post of a notification receive (the
// send path of write_with_notification) answers FI_EAGAIN as a busy provider may, so tests
// reach the path that must keep the receive for a later poll. Off unless a test arms it.
#pragma once

#include <cstdint>

namespace tether::transport::ofi {

// After `successes` more posts of a notification receive succeed, the next `failures`
// answer FI_EAGAIN without reaching the provider; (0, 0) disarms.
void inject_notification_receive_retries(std::uint32_t successes, std::uint32_t failures) noexcept;

}  // namespace tether::transport::ofi
