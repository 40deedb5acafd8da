// The hybrid transport's address: a header, the node identity, the local backend's and
// the network backend's address. Append fields, never reorder.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "tether/error.hpp"

namespace tether::transport::hybrid {

struct AddressParts {
  std::string_view identity;          // the node, as peers compare it
  std::span<const std::byte> local;    // for a peer on the same node
  std::span<const std::byte> network;  // for the others
};

// Fills `out` with the address of `parts`; false when a part is too long for the header.
[[nodiscard]] bool encode_address(const AddressParts& parts, std::vector<std::byte>& out);
// The parts of a peer's address, as views into `address`; checks magic and lengths.
[[nodiscard]] Expected<AddressParts> parse_address(std::span<const std::byte> address);

}  // namespace tether::transport::hybrid
