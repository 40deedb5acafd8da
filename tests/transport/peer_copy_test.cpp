// The copy into a peer's memory: streaming stores land every byte at every alignment and
// touch nothing beside the range; TETHER_SHM_STREAMING_COPY's values.
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "transport/shm/peer_copy.hpp"

namespace tether::testing {
namespace {

constexpr std::byte kGuard{0xee};

std::vector<std::byte> pattern(std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((i * 131 + 7) % 251);
  return out;
}

TEST(PeerCopyTest, StreamingCopyLandsEveryByteAtEveryAlignmentAndNothingBeside) {
  const std::size_t margin = 64;
  for (std::size_t bytes : {0UL, 1UL, 15UL, 16UL, 17UL, 63UL, 64UL, 65UL, 127UL, 128UL, 1000UL, 4103UL, 1UL << 20}) {
    std::vector<std::byte> source = pattern(bytes + 4);
    for (std::size_t to_offset = 0; to_offset < 18; ++to_offset) {
      for (std::size_t from_offset = 0; from_offset < 4; ++from_offset) {
        std::vector<std::byte> destination(bytes + 2 * margin, kGuard);
        transport::shm::copy_to_peer(destination.data() + margin + to_offset, source.data() + from_offset, bytes, 0);
        for (std::size_t i = 0; i < destination.size(); ++i) {
          bool inside = i >= margin + to_offset && i < margin + to_offset + bytes;
          std::byte expected = inside ? source[i - margin - to_offset + from_offset] : kGuard;
          ASSERT_EQ(destination[i], expected) << bytes << " bytes, destination offset " << to_offset
                                              << ", source offset " << from_offset << ", byte " << i;
        }
      }
    }
  }
}

TEST(PeerCopyTest, StreamingCopySettingTakesOffOnOrASizeAndNamesItselfOtherwise) {
  EXPECT_EQ(*transport::shm::parse_streaming_copy("off"), std::numeric_limits<std::size_t>::max());
  auto on = transport::shm::parse_streaming_copy("on");
  ASSERT_TRUE(on);
  EXPECT_GT(*on, 0U);
  EXPECT_LT(*on, std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(*transport::shm::parse_streaming_copy("64K"), 64U << 10);
  EXPECT_EQ(*transport::shm::parse_streaming_copy("0"), 0U);
  for (const char* bad : {"auto", "lots", ""}) {
    auto refused = transport::shm::parse_streaming_copy(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code, Errc::invalid_argument);
    EXPECT_NE(refused.error().cause.find("TETHER_SHM_STREAMING_COPY"), std::string::npos) << refused.error().cause;
    EXPECT_NE(refused.error().remedy.find("off, on"), std::string::npos) << refused.error().remedy;
  }
}

}  // namespace
}  // namespace tether::testing
