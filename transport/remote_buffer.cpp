// A RemoteBuffer as bytes, for peers that receive it over PMIx or a message (its own
// file: tests/fuzz builds it alone).
#include <cstring>

#include "transport/transport.hpp"

namespace tether::transport {

std::vector<std::byte> to_bytes(const RemoteBuffer& buffer) {
  std::vector<std::byte> bytes(sizeof(RemoteBuffer));
  std::memcpy(bytes.data(), &buffer, sizeof(RemoteBuffer));
  return bytes;
}

Expected<RemoteBuffer> remote_buffer_from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != sizeof(RemoteBuffer))
    return make_error(Errc::invalid_argument,
                      fmt::format("a remote buffer description is {} bytes, got {}",
                                  sizeof(RemoteBuffer), bytes.size()),
                      "pass exactly what to_bytes(RemoteBuffer) produced");
  RemoteBuffer buffer;
  std::memcpy(&buffer, bytes.data(), sizeof(RemoteBuffer));
  return buffer;
}

}  // namespace tether::transport
