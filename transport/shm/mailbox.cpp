#include "transport/shm/mailbox.hpp"

namespace tether::transport::shm {

Ring* claim_ring(MailboxHeader* mailbox, std::uint32_t ring_count, std::uint32_t pid) noexcept {
  for (std::uint32_t index = 0; index < ring_count; ++index) {
    Ring* ring = ring_at(mailbox, index);
    std::uint32_t free = 0;
    if (!ring->owner_pid.compare_exchange_strong(free, pid, std::memory_order_acq_rel)) continue;
    std::uint32_t claimed = mailbox->rings_claimed.load(std::memory_order_acquire);
    while (claimed < index + 1 &&
           !mailbox->rings_claimed.compare_exchange_weak(claimed, index + 1, std::memory_order_acq_rel)) {
    }
    return ring;
  }
  return nullptr;
}

}  // namespace tether::transport::shm
