// hybrid::parse_address on any bytes. An accepted address is exactly its header and
// three parts, every part a view inside the input, and encoding the parts again gives
// the same bytes.
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"
#include "transport/hybrid/hybrid_address.hpp"

using namespace tether::transport::hybrid;

namespace {

bool inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> address(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  auto parts = parse_address(address);
  if (!parts) return 0;
  std::span<const std::byte> identity(reinterpret_cast<const std::byte*>(parts->identity.data()), parts->identity.size());
  FUZZ_ASSERT(inside(identity, address) && inside(parts->local, address) && inside(parts->network, address));
  FUZZ_ASSERT(12 + identity.size() + parts->local.size() + parts->network.size() == address.size());
  std::vector<std::byte> again;
  FUZZ_ASSERT(encode_address(*parts, again));
  FUZZ_ASSERT(again == address);
  return 0;
}
