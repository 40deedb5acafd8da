// Building and parsing hybrid addresses (hybrid_address.hpp). Pure: tests/fuzz drives
// parse_address with any bytes.
#include "transport/hybrid/hybrid_address.hpp"

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include <fmt/format.h>

namespace tether::transport::hybrid {
namespace {

struct AddressHeader {
  std::uint32_t magic;
  std::uint16_t identity_bytes;
  std::uint16_t local_bytes;
  std::uint32_t network_bytes;
};
constexpr std::uint32_t kAddressMagic = 0x54485942;  // "THYB"

}  // namespace

bool encode_address(const AddressParts& parts, std::vector<std::byte>& out) {
  if (parts.identity.size() > 0xffff || parts.local.size() > 0xffff || parts.network.size() > 0xffffffffU) return false;
  AddressHeader header{kAddressMagic, static_cast<std::uint16_t>(parts.identity.size()),
                       static_cast<std::uint16_t>(parts.local.size()), static_cast<std::uint32_t>(parts.network.size())};
  using Bytes = std::span<const std::byte>;
  Bytes header_bytes(reinterpret_cast<const std::byte*>(&header), sizeof header);
  Bytes identity(reinterpret_cast<const std::byte*>(parts.identity.data()), parts.identity.size());
  out.clear();
  for (Bytes part : std::initializer_list<Bytes>{header_bytes, identity, parts.local, parts.network})
    out.insert(out.end(), part.begin(), part.end());
  return true;
}

Expected<AddressParts> parse_address(std::span<const std::byte> address) {
  AddressHeader header{};
  if (address.size() >= sizeof header) std::memcpy(&header, address.data(), sizeof header);
  std::size_t expected = sizeof header + header.identity_bytes + header.local_bytes + std::size_t{header.network_bytes};
  if (header.magic != kAddressMagic || address.size() != expected)
    return make_error(Errc::invalid_argument,
                      fmt::format("a {}-byte peer address that is not a hybrid transport's", address.size()),
                      "every rank of a job must use the same transport: set the same TETHER_SHM, "
                      "TETHER_SHM_TRANSPORT, TETHER_OFI_PROVIDER and TETHER_NODE_NAME rules on all of them");
  auto rest = address.subspan(sizeof header);
  return AddressParts{std::string_view(reinterpret_cast<const char*>(rest.data()), header.identity_bytes),
                      rest.subspan(header.identity_bytes, header.local_bytes),
                      rest.subspan(std::size_t{header.identity_bytes} + header.local_bytes)};
}

}  // namespace tether::transport::hybrid
