// Malformed messages the hostile rank sends: each with the log line the receiver must
// print for it (tests/hostile/hostile_test.cpp asserts every one appears).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tether::hostile {

struct RawMessage {
  std::string name;           // what is wrong with it
  std::vector<std::byte> bytes;
  bool take_sequence = false; // the header gets the pair's next sequence number
  std::string receiver_log;   // a piece of the receiver's log line ("" = not asserted)
};

// Headers and bodies that break one rule each, against a receiver of rank `receiver`
// in a job of `job_size`.
std::vector<RawMessage> malformed_messages(int sender, int receiver, int job_size);
// `count` messages of random bytes; every second one starts with a valid magic, version,
// kind and source rank, so it reaches the length and body checks (fixed seed).
std::vector<RawMessage> random_messages(int sender, int count, std::uint64_t seed);
// A rendezvous get whose source is a made-up address and key, for a receive of `tag`.
RawMessage bogus_get(int sender, int tag, std::uint64_t message_bytes);
// A rendezvous put from a send that does not exist: the receive of `tag` answers with a
// CTS (its landing key) and then waits for writes only the test makes.
RawMessage orphan_put(int sender, int tag, std::uint64_t message_bytes);

}  // namespace tether::hostile
