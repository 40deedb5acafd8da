// transport::remote_buffer_from_bytes on any bytes: only exactly 32 bytes are accepted,
// and to_bytes gives them back unchanged.
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"
#include "transport/transport.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  auto buffer = tether::transport::remote_buffer_from_bytes(bytes);
  FUZZ_ASSERT(buffer.has_value() == (size == sizeof(tether::transport::RemoteBuffer)));
  if (buffer) FUZZ_ASSERT(tether::transport::to_bytes(*buffer) == bytes);
  return 0;
}
