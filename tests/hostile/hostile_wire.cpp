// Builds the malformed messages of hostile_wire.hpp from the real wire structs.
#include "tests/hostile/hostile_wire.hpp"

#include <cstring>
#include <random>
#include <string>

#include "runtime/messaging/wire.hpp"

namespace tether::hostile {
namespace {

using namespace messaging;

template <class... Parts>
std::vector<std::byte> join(const Parts&... parts) {
  std::vector<std::byte> bytes;
  auto append = [&bytes](const auto& part) {
    auto* begin = reinterpret_cast<const std::byte*>(&part);
    bytes.insert(bytes.end(), begin, begin + sizeof part);
  };
  (append(parts), ...);
  return bytes;
}

MessageHeader header(MessageKind kind, int source, std::uint32_t sequence, std::uint64_t bytes) {
  return make_header(kind, source, 42, sequence, bytes);
}

RawMessage wrong_field(std::string name, MessageHeader broken, std::string log) {
  return {std::move(name), join(broken), false, std::move(log)};
}

std::vector<RawMessage> header_faults(int sender, int job_size) {
  MessageHeader good = header(MessageKind::eager, sender, 0x7fff0000U, 0);
  std::vector<RawMessage> faults;
  std::vector<std::byte> whole = join(good);
  faults.push_back({"truncated header", std::vector<std::byte>(whole.begin(), whole.begin() + 16), false,
                    "16 bytes is shorter than a header"});
  MessageHeader broken = good;
  broken.magic = 0xbad1;
  faults.push_back(wrong_field("bad magic", broken, "bad magic 0xbad1"));
  broken = good;
  broken.version = 9;
  faults.push_back(wrong_field("wire version 9", broken, "wire version 9"));
  broken = good;
  broken.kind = static_cast<MessageKind>(10);
  faults.push_back(wrong_field("unknown kind", broken, "unknown kind 10"));
  broken = good;
  broken.source_rank = static_cast<std::uint32_t>(job_size + 5);
  faults.push_back(wrong_field("source rank out of range", broken, "in a job of"));
  return faults;
}

std::vector<RawMessage> length_faults(int sender) {
  std::vector<RawMessage> faults;
  std::byte payload[10] = {};
  faults.push_back({"eager shorter than its header says", join(header(MessageKind::eager, sender, 1, 100), payload),
                    false, "header says 132"});
  faults.push_back({"eager longer than its header says", join(header(MessageKind::eager, sender, 1, 2), payload),
                    false, "header says 34"});
  faults.push_back({"cts without its body", join(header(MessageKind::cts, sender, 0, 0)), false,
                    "header says " + std::to_string(sizeof(MessageHeader) + sizeof(ClearToSend))});
  faults.push_back({"channel message shorter than its header says",
                    join(header(MessageKind::channel, sender, 0, 100), ChannelCarry{kChannelNotificationBit | 1, 0}, payload),
                    false, "header says " + std::to_string(kChannelHeaderBytes + 100)});
  ClearToSend past_target{{1, 1}, {2, 2}, {0x1000, 7, 0x1000, 64}, 4096, 4096};
  faults.push_back({"cts writing past its target", join(header(MessageKind::cts, sender, 0, 4096), past_target),
                    false, "cts asks to write 4096 bytes into a 64-byte target"});
  ClearToSend zero_chunk{{1, 1}, {2, 2}, {0x1000, 7, 0x1000, 4096}, 4096, 0};
  faults.push_back({"cts with zero chunks", join(header(MessageKind::cts, sender, 0, 4096), zero_chunk), false,
                    "cts has a zero chunk size"});
  return faults;
}

std::vector<RawMessage> protocol_faults(int sender, int receiver) {
  std::vector<RawMessage> faults;
  RendezvousRequest unknown{{3, 3}, {}, static_cast<RendezvousProtocol>(7), {}};
  faults.push_back({"rts of protocol 7", join(header(MessageKind::rts, sender, 0x7fff0000U, 64), unknown), false,
                    "rts names protocol 7"});
  RendezvousRequest short_source{{3, 3}, {0x1000, 9, 0x1000, 16}, RendezvousProtocol::get, {}};
  faults.push_back({"get rts with a short source", join(header(MessageKind::rts, sender, 0x7fff0000U, 4096), short_source),
                    false, "rts offers a source shorter than the message"});
  ClearToSend stray{{12345, 77}, {2, 2}, {0x1000, 7, 0x1000, 64}, 64, 64};
  faults.push_back({"cts for no send", join(header(MessageKind::cts, sender, 0, 64), stray), false,
                    "CTS from rank " + std::to_string(sender) + " for a send that is not in flight"});
  RendezvousDone stray_fin{{54321, 99}};
  faults.push_back({"fin for no send", join(header(MessageKind::fin, sender, 0, 64), stray_fin), false,
                    "FIN from rank " + std::to_string(sender) + " for a send that is not in flight"});
  RendezvousAbort stray_abort{{54321, 99}, 3};
  faults.push_back({"abort for no receive",
                    join(header(MessageKind::abort, sender, 0, static_cast<std::uint64_t>(Errc::transport)), stray_abort),
                    false, "abort from rank " + std::to_string(sender) + " for no receive waiting on its writes"});
  faults.push_back({"abort without an error", join(header(MessageKind::abort, sender, 0, 0), stray_abort), false,
                    "an abort without a known error code"});
  std::byte payload[16] = {};
  faults.push_back({"eager payload that spent no credit", join(header(MessageKind::eager, sender, 0, 16), payload), true,
                    "from rank " + std::to_string(sender) + ": it spent no eager credit"});
  MessageHeader flagged_empty = header(MessageKind::eager, sender, 0, 0);
  flagged_empty.flags = kUsesCredit;
  faults.push_back({"a credit spent by an empty message", join(flagged_empty), false,
                    "a credit spent by a message without an eager payload"});
  faults.push_back({"a channel word without the channel bit", join(header(MessageKind::channel, sender, 0, 0), ChannelCarry{1, 0}),
                    false, "a channel message carries a word that is not a channel notification"});
  faults.push_back({"a channel message carrying nothing", join(header(MessageKind::channel, sender, 0, 0), ChannelCarry{0, 0}),
                    false, "a channel message without a notification carries a payload or nothing at all"});
  MessageHeader generous = header(MessageKind::credit, sender, 0, 0);
  generous.credits_returned = 100000;
  faults.push_back({"more credits given back than lent", join(generous), false,
                    "rank " + std::to_string(sender) + " gave back 100000 eager credits"});
  faults.push_back({"sequence far ahead", join(header(MessageKind::eager, sender, 0x7fff0000U, 0)), false,
                    "dropped message 2147418112 from rank " + std::to_string(sender) + ": more than 65536 ahead"});
  faults.push_back({"sequence already taken", join(header(MessageKind::eager, sender, 0x90000000U, 0)), false,
                    "duplicate message 2415919104 from rank " + std::to_string(sender)});
  faults.push_back({"spoofed source: the receiver itself", join(header(MessageKind::eager, receiver, 0x90000000U, 0)),
                    false, "duplicate message 2415919104 from rank " + std::to_string(receiver)});
  return faults;
}

}  // namespace

std::vector<RawMessage> malformed_messages(int sender, int receiver, int job_size) {
  std::vector<RawMessage> all = header_faults(sender, job_size);
  for (auto& fault : length_faults(sender)) all.push_back(std::move(fault));
  for (auto& fault : protocol_faults(sender, receiver)) all.push_back(std::move(fault));
  return all;
}

std::vector<RawMessage> random_messages(int sender, int count, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<RawMessage> all;
  for (int index = 0; index < count; ++index) {
    std::vector<std::byte> bytes(1 + random() % 300);
    for (std::byte& b : bytes) b = static_cast<std::byte>(random());
    if (index % 2 == 1 && bytes.size() >= 8) {  // past the magic, version, kind and rank checks
      MessageHeader prefix = make_header(static_cast<MessageKind>(1 + random() % 4), sender, 0, 0, 0);
      std::memcpy(bytes.data(), &prefix, 8);
    }
    all.push_back({"random bytes", std::move(bytes), false, ""});
  }
  return all;
}

RawMessage bogus_get(int sender, int tag, std::uint64_t message_bytes) {
  // key: fd 999 and page 5 on shm-own, a key never handed out on libfabric.
  RendezvousRequest made_up{{7, 7}, {0x10000, (std::uint64_t{999} << 32) | 5, 0x10000, message_bytes},
                            RendezvousProtocol::get, {}};
  return {"get rts with a made-up source", join(make_header(MessageKind::rts, sender, tag, 0, message_bytes), made_up),
          true, ""};  // the log line differs by transport: the receive's error is checked instead
}

RawMessage orphan_put(int sender, int tag, std::uint64_t message_bytes) {
  RendezvousRequest orphan{{7, 7}, {}, RendezvousProtocol::put, {}};
  return {"put rts of no send", join(make_header(MessageKind::rts, sender, tag, 0, message_bytes), orphan), true, ""};
}

}  // namespace tether::hostile
